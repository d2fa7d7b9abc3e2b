// GGUF files (version 3), the single-file model format of llama.cpp and Ollama: a writer that takes
// typed metadata and a list of tensors, and streams each tensor's bytes from a producer, so a model
// is never held in memory twice.
//
// Layout (all little-endian):
//   "GGUF"  u32 version = 3  u64 tensor_count  u64 metadata_count
//   metadata_count x { string key, u32 value_type, value }
//   tensor_count   x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   zero padding to `alignment`, then the data section: each tensor at its offset (a multiple of
//   `alignment`, relative to the section start), zero padding after each one.
// A string is u64 length + UTF-8 bytes (no terminator); an array is u32 element type + u64 count +
// elements. ne[] lists dimensions innermost first, so a torch (rows, cols) matrix has ne = [cols, rows].
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "src/io/ggml_types.h"
#include "src/io/gguf_format.h"

namespace ferry::io {

class GgufWriter {
 public:
  // The producer of one tensor's bytes: a contiguous CPU tensor of exactly the announced size (its
  // dtype does not matter; Q8_0 data comes as uint8). Called once, in order, while writing.
  using TensorProducer = std::function<at::Tensor()>;

  // Metadata, written in the order added. A key may be added once (InternalError otherwise).
  void add_uint32(const std::string& key, uint32_t value);
  void add_int32(const std::string& key, int32_t value);
  void add_uint64(const std::string& key, uint64_t value);
  void add_float32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string(const std::string& key, const std::string& value);
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_float32_array(const std::string& key, const std::vector<float>& values);
  void add_int32_array(const std::string& key, const std::vector<int32_t>& values);
  void add_bool_array(const std::string& key, const std::vector<bool>& values);

  // A tensor of `shape` (torch order, outermost first) stored as `type`; its bytes come from
  // `produce` when write() reaches it. Names must be unique.
  void add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type, TensorProducer produce);

  int64_t tensor_count() const { return static_cast<int64_t>(tensors_.size()); }
  uint64_t data_bytes() const { return data_bytes_; }  // the data section, padding included

  // Writes the file atomically (temporary sibling, fsync, rename; see AtomicFileWriter). Throws
  // InputError when the file cannot be written; InternalError when a producer returns the wrong
  // number of bytes. Returns the file size.
  uint64_t write(const std::filesystem::path& path) const;

 private:
  struct TensorEntry {
    std::string name;
    std::vector<int64_t> shape;
    GgmlType type;
    uint64_t offset;
    uint64_t nbytes;
    TensorProducer produce;
  };

  void begin_key(const std::string& key, GgufValueType type);

  std::string metadata_;  // encoded key/value pairs
  uint64_t metadata_count_ = 0;
  std::set<std::string> keys_;
  std::vector<TensorEntry> tensors_;
  std::set<std::string> tensor_names_;
  uint64_t data_bytes_ = 0;
};

}  // namespace ferry::io
