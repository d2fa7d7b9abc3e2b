// Safetensors files (the format of Hugging Face checkpoints): a validated, memory-mapped reader
// with zero-copy tensor views, and an atomic writer.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {str: str}, "<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}}
// then the data section; offsets are relative to it. The reader checks every entry before any
// tensor is touched (known dtype, shape x element size == span, spans in bounds, contiguous,
// non-overlapping and covering the data section), so a corrupt file is an InputError naming the
// file and the problem, never a crash.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ferry {
class AtomicFileWriter;
}

namespace ferry::io {

using TensorMap = std::map<std::string, at::Tensor>;  // ordered by name

class MappedFile;

// One tensor's entry in a safetensors header.
struct TensorInfo {
  at::ScalarType dtype = at::ScalarType::Float;
  std::vector<int64_t> shape;  // [] is a scalar
  uint64_t begin = 0;          // byte offsets within the data section
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

// Safetensors dtype names ("BF16", "F32", ...) <-> torch dtypes. Readable: F64 F32 F16 BF16
// F8_E4M3 F8_E5M2 I64 I32 I16 I8 U8 BOOL.
std::string safetensors_dtype_name(at::ScalarType dtype);  // throws InputError if not storable

// An open, validated safetensors file. Cheap to copy (shares the mapping).
class SafetensorsFile {
 public:
  // Maps and validates `file`; throws InputError naming the file on any problem.
  explicit SafetensorsFile(const std::filesystem::path& file);

  const std::filesystem::path& path() const;
  const std::vector<std::string>& names() const { return names_; }  // sorted
  bool contains(const std::string& name) const { return infos_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // InputError if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section

  // A CPU tensor over the mapped bytes (no copy) that keeps the mapping alive. Writes to it are
  // private copy-on-write pages, never written back. A tensor whose bytes are not aligned to its
  // element size (possible in files from other writers), or any tensor of a file that could only
  // be mapped read-only (see MappedFile), is returned as an owned copy instead.
  at::Tensor tensor(const std::string& name) const;
  // An owned CPU tensor (a copy of the bytes), independent of the file.
  at::Tensor load(const std::string& name) const;
  TensorMap load_all() const;

 private:
  std::shared_ptr<const MappedFile> mapping_;
  uint64_t data_offset_ = 0;
  std::map<std::string, TensorInfo> infos_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

// One tensor of a file written in parts: its name, dtype and shape.
struct TensorSlot {
  std::string name;
  at::ScalarType dtype = at::ScalarType::Float;
  std::vector<int64_t> shape;
};

// A safetensors file written in parts, for contents too large to hold at once (the NVMe tier's
// optimizer state): the header from the slots (sorted by name, as save_safetensors), then each
// tensor's bytes in any order and pieces, then commit(), which checks every byte was written.
// Atomic as save_safetensors: without commit() nothing appears under `file`.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::filesystem::path& file, const std::vector<TensorSlot>& slots,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // `size` bytes at `byte_offset` of tensor `name`'s data.
  void write(const std::string& name, uint64_t byte_offset, const void* data, size_t size);
  void commit();

 private:
  std::filesystem::path file_;
  std::map<std::string, std::pair<uint64_t, uint64_t>> spans_;  // name -> (offset in data, bytes)
  uint64_t data_offset_ = 0, data_bytes_ = 0, written_ = 0;
  std::unique_ptr<AtomicFileWriter> out_;
};

// All tensors of `file` as owned CPU tensors, dtype as stored.
TensorMap load_safetensors(const std::filesystem::path& file);

// Writes `tensors` (any device; made contiguous on CPU) sorted by name, with `metadata` under
// "__metadata__" ("format": "pt" is added unless given, as transformers expects). The header is
// space-padded to a multiple of 8 bytes. Atomic: a temporary sibling renamed into place.
void save_safetensors(const std::filesystem::path& file, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace ferry::io
