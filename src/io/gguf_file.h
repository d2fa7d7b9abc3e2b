// Reading GGUF files (versions 2 and 3), the single-file model format of llama.cpp, LM Studio and
// Ollama (layout: gguf_writer.h). The whole file is mapped and validated before anything is used:
// magic, version, counts against the file size, every string and array length, metadata types,
// tensor ranks, shapes, types (ggml_types.h), rows that are whole blocks, the alignment, and each
// tensor's data lying inside the file without overlapping another. Any violation is an InputError
// naming the file, the field (key or tensor) and its byte offset, so a truncated download or a
// flipped bit is reported, never read as garbage.
//
// Metadata values are kept as read: scalars widened (integers to int64 / uint64, floats to double),
// arrays of numbers, booleans or strings as vectors. Arrays of arrays (no model key uses them) are
// skipped over and kept as an empty array of type `array`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/io/ggml_types.h"
#include "src/io/gguf_format.h"

namespace ferry::io {

class MappedFile;

struct GgufValue {
  GgufValueType type = GgufValueType::uint8;
  GgufValueType element_type = GgufValueType::uint8;  // arrays only
  uint64_t offset = 0;                                 // where the value starts in the file

  // Scalars: integers and booleans in `integer` (uint64 above 2^63 - 1 in `unsigned_integer` too),
  // floats in `number`, strings in `text`.
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double number = 0.0;
  std::string text;
  // Arrays: numbers in `numbers` (integers exactly up to 2^53; int arrays also in `integers`),
  // strings in `texts`.
  std::vector<double> numbers;
  std::vector<int64_t> integers;
  std::vector<std::string> texts;

  bool is_array() const { return type == GgufValueType::array; }
  bool is_integer() const;  // any integer type (not bool)
  bool is_float() const { return type == GgufValueType::float32 || type == GgufValueType::float64; }
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the innermost (row) dimension
  GgmlType type = GgmlType::f32;
  uint64_t offset = 0;      // within the data section
  uint64_t nbytes = 0;
  uint64_t info_offset = 0; // where the tensor's entry starts in the file, for messages

  // torch order (outermost first): ne reversed.
  std::vector<int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
  int64_t elements() const;
};

// "general.architecture" etc. in a GGUF value type's name: "uint32", "string", "array of float32".
std::string gguf_value_type_name(const GgufValue& value);

class GgufFile {
 public:
  // Maps and validates `path`. Throws InputError naming the file and the field on any problem.
  static GgufFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const;
  uint32_t version() const { return version_; }
  uint64_t file_bytes() const;
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }

  bool has(const std::string& key) const { return metadata_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }

  // Typed getters: InputError naming the file and key when the key is missing (no default given)
  // or holds another type (integers of any width convert when the value fits; floats accept
  // integers).
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  const std::vector<std::string>& get_strings(const std::string& key) const;  // array of strings
  const std::vector<double>& get_numbers(const std::string& key) const;      // array of numbers

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // The tensor's bytes (nbytes of them), inside the mapping.
  const uint8_t* tensor_data(const GgufTensorInfo& tensor) const;

  // "GGUF file '<path>'", for messages of callers.
  std::string describe() const;

 private:
  GgufFile() = default;

  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufAlignment;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace ferry::io
