// Parsing and validating a mapped GGUF file (see gguf_file.h).
#include "src/io/gguf_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "src/io/mapped_file.h"

namespace ferry::io {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is read little-endian");

constexpr uint64_t kMaxDims = 4;  // GGML_MAX_DIMS

const char* scalar_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::uint8: return "uint8";
    case GgufValueType::int8: return "int8";
    case GgufValueType::uint16: return "uint16";
    case GgufValueType::int16: return "int16";
    case GgufValueType::uint32: return "uint32";
    case GgufValueType::int32: return "int32";
    case GgufValueType::float32: return "float32";
    case GgufValueType::boolean: return "bool";
    case GgufValueType::string: return "string";
    case GgufValueType::array: return "array";
    case GgufValueType::uint64: return "uint64";
    case GgufValueType::int64: return "int64";
    case GgufValueType::float64: return "float64";
  }
  return "?";
}

// Bytes of one scalar of `type` (0 for string and array, whose size varies).
uint64_t scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::uint8: case GgufValueType::int8: case GgufValueType::boolean: return 1;
    case GgufValueType::uint16: case GgufValueType::int16: return 2;
    case GgufValueType::uint32: case GgufValueType::int32: case GgufValueType::float32: return 4;
    case GgufValueType::uint64: case GgufValueType::int64: case GgufValueType::float64: return 8;
    case GgufValueType::string: case GgufValueType::array: return 0;
  }
  return 0;
}

// A cursor over the mapped bytes that throws InputError, naming the file, the field being read
// and the offset, instead of reading past the end.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, std::string file) : data_(data), size_(size), file_(std::move(file)) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InputError("GGUF file '" + file_ + "': " + field + " (byte " + std::to_string(pos_) + "): " + what +
                     "; the file is truncated or corrupt — download or convert it again");
  }

  void need(uint64_t bytes, const std::string& field) {
    if (bytes > remaining()) {
      fail(field, "needs " + std::to_string(bytes) + " bytes but the file ends after " +
                      std::to_string(remaining()));
    }
  }

  template <class T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const std::string& field) {
    const auto length = read<uint64_t>(field + " length");
    need(length, field);
    std::string text(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return text;
  }

  void skip(uint64_t bytes, const std::string& field) {
    need(bytes, field);
    pos_ += bytes;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  std::string file_;
  uint64_t pos_ = 0;
};

GgufValueType read_value_type(Cursor& in, const std::string& field) {
  const auto raw = in.read<uint32_t>(field + " type");
  if (raw > static_cast<uint32_t>(GgufValueType::float64)) {
    in.fail(field, "unknown value type " + std::to_string(raw) + " (GGUF defines 0-12)");
  }
  return static_cast<GgufValueType>(raw);
}

// One scalar of `type` into `value` (scalar fields) — or appended to its arrays when `array`.
void read_scalar(Cursor& in, GgufValueType type, GgufValue& value, bool array, const std::string& field) {
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double number = 0.0;
  switch (type) {
    case GgufValueType::uint8: unsigned_integer = in.read<uint8_t>(field); break;
    case GgufValueType::int8: integer = in.read<int8_t>(field); break;
    case GgufValueType::uint16: unsigned_integer = in.read<uint16_t>(field); break;
    case GgufValueType::int16: integer = in.read<int16_t>(field); break;
    case GgufValueType::uint32: unsigned_integer = in.read<uint32_t>(field); break;
    case GgufValueType::int32: integer = in.read<int32_t>(field); break;
    case GgufValueType::uint64: unsigned_integer = in.read<uint64_t>(field); break;
    case GgufValueType::int64: integer = in.read<int64_t>(field); break;
    case GgufValueType::boolean: {
      const auto byte = in.read<uint8_t>(field);
      if (byte > 1) in.fail(field, "a bool holds " + std::to_string(byte) + " (0 or 1 expected)");
      integer = byte;
      break;
    }
    case GgufValueType::float32: number = in.read<float>(field); break;
    case GgufValueType::float64: number = in.read<double>(field); break;
    case GgufValueType::string:
      if (array) value.texts.push_back(in.read_string(field)); else value.text = in.read_string(field);
      return;
    case GgufValueType::array: FERRY_CHECK(false, "read_scalar of an array"); return;
  }
  const bool is_unsigned = type == GgufValueType::uint8 || type == GgufValueType::uint16 ||
                           type == GgufValueType::uint32 || type == GgufValueType::uint64;
  if (is_unsigned) {
    integer = unsigned_integer > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                  ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(unsigned_integer);
  } else if (type != GgufValueType::float32 && type != GgufValueType::float64) {
    unsigned_integer = integer < 0 ? 0 : static_cast<uint64_t>(integer);
  }
  const bool is_float = type == GgufValueType::float32 || type == GgufValueType::float64;
  if (!is_float) number = is_unsigned ? static_cast<double>(unsigned_integer) : static_cast<double>(integer);
  if (array) {
    value.numbers.push_back(number);
    if (!is_float) value.integers.push_back(integer);
  } else {
    value.integer = integer;
    value.unsigned_integer = unsigned_integer;
    value.number = number;
  }
}

void skip_array(Cursor& in, const std::string& field, int depth);

void skip_value(Cursor& in, GgufValueType type, const std::string& field, int depth) {
  if (type == GgufValueType::array) return skip_array(in, field, depth + 1);
  if (type == GgufValueType::string) {
    const auto length = in.read<uint64_t>(field + " length");
    in.skip(length, field);
    return;
  }
  in.skip(scalar_size(type), field);
}

void skip_array(Cursor& in, const std::string& field, int depth) {
  if (depth > 8) in.fail(field, "arrays nested deeper than 8");
  const GgufValueType element = read_value_type(in, field + " element");
  const auto count = in.read<uint64_t>(field + " count");
  // Every element takes at least one byte (a string its 8-byte length): a count beyond the bytes
  // left cannot be honest.
  const uint64_t least = element == GgufValueType::string || element == GgufValueType::array ? 8 : scalar_size(element);
  if (count > in.remaining() / least) {
    in.fail(field, "an array of " + std::to_string(count) + " elements of " + scalar_type_name(element) +
                       " does not fit in the " + std::to_string(in.remaining()) + " bytes left");
  }
  for (uint64_t i = 0; i < count; ++i) skip_value(in, element, field, depth);
}

GgufValue read_value(Cursor& in, const std::string& key) {
  GgufValue value;
  value.offset = in.offset();
  const std::string field = "metadata '" + key + "'";
  value.type = read_value_type(in, field);
  if (value.type != GgufValueType::array) {
    read_scalar(in, value.type, value, false, field);
    return value;
  }
  value.element_type = read_value_type(in, field + " element");
  const auto count = in.read<uint64_t>(field + " count");
  const bool varying = value.element_type == GgufValueType::string || value.element_type == GgufValueType::array;
  const uint64_t least = varying ? 8 : scalar_size(value.element_type);
  if (count > in.remaining() / least) {
    in.fail(field, "an array of " + std::to_string(count) + " elements of " + scalar_type_name(value.element_type) +
                       " does not fit in the " + std::to_string(in.remaining()) + " bytes left");
  }
  if (value.element_type == GgufValueType::array) {
    for (uint64_t i = 0; i < count; ++i) skip_array(in, field, 1);
    return value;
  }
  if (value.element_type == GgufValueType::string) value.texts.reserve(count); else value.numbers.reserve(count);
  for (uint64_t i = 0; i < count; ++i) read_scalar(in, value.element_type, value, true, field);
  return value;
}

}  // namespace

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::uint8: case GgufValueType::int8: case GgufValueType::uint16: case GgufValueType::int16:
    case GgufValueType::uint32: case GgufValueType::int32: case GgufValueType::uint64: case GgufValueType::int64:
      return true;
    default: return false;
  }
}

std::string gguf_value_type_name(const GgufValue& value) {
  if (!value.is_array()) return scalar_type_name(value.type);
  return std::string("array of ") + scalar_type_name(value.element_type);
}

int64_t GgufTensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  GgufFile file;
  file.file_ = MappedFile::open(path);
  const std::string name = path.string();
  Cursor in(reinterpret_cast<const uint8_t*>(file.file_->data()), file.file_->size(), name);

  char magic[4] = {};
  if (file.file_->size() >= 4) std::memcpy(magic, file.file_->data(), 4);
  if (std::memcmp(magic, kGgufMagic, 4) != 0) {
    throw InputError("'" + name + "' is not a GGUF file (it does not start with \"GGUF\"); give a .gguf model file "
                     "as written by llama.cpp, LM Studio or Ollama");
  }
  in.skip(4, "magic");
  file.version_ = in.read<uint32_t>("version");
  if (file.version_ != 2 && file.version_ != 3) {
    throw InputError("GGUF file '" + name + "': version " + std::to_string(file.version_) +
                     " is not supported (Ferry reads versions 2 and 3; convert the model again with a current llama.cpp)");
  }
  const auto tensor_count = in.read<uint64_t>("tensor count");
  const auto metadata_count = in.read<uint64_t>("metadata count");
  // A metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes, a tensor entry
  // 8 + 4 + 8 + 4 + 8.
  if (metadata_count > in.remaining() / 13) in.fail("metadata count", std::to_string(metadata_count) + " entries cannot fit");
  if (tensor_count > in.remaining() / 32) in.fail("tensor count", std::to_string(tensor_count) + " tensors cannot fit");

  for (uint64_t i = 0; i < metadata_count; ++i) {
    const std::string key = in.read_string("metadata key " + std::to_string(i));
    if (file.metadata_.count(key) != 0) in.fail("metadata '" + key + "'", "the key appears twice");
    file.metadata_.emplace(key, read_value(in, key));
  }
  if (const GgufValue* alignment = file.find("general.alignment")) {
    const bool power_of_two = alignment->is_integer() && alignment->unsigned_integer != 0 &&
                              alignment->unsigned_integer <= (1u << 30) &&
                              (alignment->unsigned_integer & (alignment->unsigned_integer - 1)) == 0;
    if (!power_of_two) {
      throw InputError("GGUF file '" + name + "': metadata 'general.alignment' must be a power of two, got " +
                       (alignment->is_integer() ? std::to_string(alignment->unsigned_integer) : gguf_value_type_name(*alignment)) +
                       "; the file is corrupt — download or convert it again");
    }
    file.alignment_ = static_cast<uint32_t>(alignment->unsigned_integer);
  }

  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo tensor;
    tensor.info_offset = in.offset();
    tensor.name = in.read_string("tensor " + std::to_string(i) + " name");
    const std::string field = "tensor '" + tensor.name + "'";
    if (file.tensor_index_.count(tensor.name) != 0) in.fail(field, "the name appears twice");
    const auto dims = in.read<uint32_t>(field + " rank");
    if (dims == 0 || dims > kMaxDims) in.fail(field, "rank " + std::to_string(dims) + " (1 to 4 expected)");
    uint64_t elements = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const auto extent = in.read<uint64_t>(field + " dimension " + std::to_string(d));
      if (extent == 0 || extent > (uint64_t{1} << 40) || elements > (uint64_t{1} << 50) / extent) {
        in.fail(field, "dimension " + std::to_string(d) + " is " + std::to_string(extent) + ", not a plausible size");
      }
      elements *= extent;
      tensor.ne.push_back(static_cast<int64_t>(extent));
    }
    const auto type = in.read<uint32_t>(field + " type");
    const GgmlTypeTraits* traits = find_ggml_type(type);
    if (traits == nullptr) {
      throw InputError("GGUF file '" + name + "': tensor '" + tensor.name + "' has ggml type " + ggml_type_name(type) +
                       ", which Ferry does not read (it reads " + ggml_supported_type_names() +
                       "); requantise the model to one of these, e.g. with llama.cpp's llama-quantize");
    }
    tensor.type = traits->type;
    if (tensor.ne[0] % traits->block_elements != 0) {
      in.fail(field, "rows of " + std::to_string(tensor.ne[0]) + " values are not whole " + traits->name + " blocks of " +
                         std::to_string(traits->block_elements));
    }
    tensor.nbytes = ggml_nbytes(tensor.type, static_cast<int64_t>(elements));
    tensor.offset = in.read<uint64_t>(field + " offset");
    if (tensor.offset % file.alignment_ != 0) {
      in.fail(field + " offset", std::to_string(tensor.offset) + " is not a multiple of the alignment " +
                                     std::to_string(file.alignment_));
    }
    file.tensor_index_.emplace(tensor.name, file.tensors_.size());
    file.tensors_.push_back(std::move(tensor));
  }

  const uint64_t header_end = in.offset();
  file.data_offset_ = (header_end + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  const uint64_t size = file.file_->size();
  if (!file.tensors_.empty() && file.data_offset_ > size) {
    in.fail("data section", "starts at byte " + std::to_string(file.data_offset_) + " past the end of the file");
  }
  const uint64_t data_bytes = size - std::min(size, file.data_offset_);
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& tensor : file.tensors_) {
    if (tensor.offset > data_bytes || tensor.nbytes > data_bytes - tensor.offset) {
      throw InputError("GGUF file '" + name + "': tensor '" + tensor.name + "' (" + ggml_type_name(tensor.type) + ", " +
                       std::to_string(tensor.nbytes) + " bytes at data offset " + std::to_string(tensor.offset) +
                       ") runs past the end of the file (" + std::to_string(data_bytes) +
                       " data bytes); the file is truncated or corrupt — download or convert it again");
    }
    by_offset.push_back(&tensor);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& before = *by_offset[i - 1];
    if (before.offset + before.nbytes > by_offset[i]->offset) {
      throw InputError("GGUF file '" + name + "': tensors '" + before.name + "' and '" + by_offset[i]->name +
                       "' overlap in the data section (offsets " + std::to_string(before.offset) + " and " +
                       std::to_string(by_offset[i]->offset) + "); the file is corrupt — download or convert it again");
    }
  }
  return file;
}

const std::filesystem::path& GgufFile::path() const { return file_->path(); }
uint64_t GgufFile::file_bytes() const { return file_->size(); }
std::string GgufFile::describe() const { return "GGUF file '" + path().string() + "'"; }

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {

[[noreturn]] void wrong_type(const GgufFile& file, const std::string& key, const GgufValue& value, const char* wanted) {
  throw InputError(file.describe() + ": metadata '" + key + "' is " + gguf_value_type_name(value) + ", expected " + wanted +
                   "; the file was written by a converter Ferry does not know, or is corrupt");
}

[[noreturn]] void missing(const GgufFile& file, const std::string& key) {
  throw InputError(file.describe() + ": metadata '" + key + "' is missing; the file lacks what a " +
                   "model of its architecture needs — convert it again with a current llama.cpp");
}

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) missing(*this, key);
  if (value->type != GgufValueType::string) wrong_type(*this, key, *value, "a string");
  return value->text;
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) missing(*this, key);
  if (!value->is_integer()) wrong_type(*this, key, *value, "an integer");
  if (value->type == GgufValueType::uint64 &&
      value->unsigned_integer > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw InputError(describe() + ": metadata '" + key + "' = " + std::to_string(value->unsigned_integer) +
                     " is out of range; the file is corrupt");
  }
  return value->integer;
}

int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const { return has(key) ? get_int(key) : fallback; }

double GgufFile::get_float(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) missing(*this, key);
  if (!value->is_float() && !value->is_integer()) wrong_type(*this, key, *value, "a number");
  return value->number;
}

double GgufFile::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return fallback;
  if (value->type != GgufValueType::boolean) wrong_type(*this, key, *value, "a bool");
  return value->integer != 0;
}

const std::vector<std::string>& GgufFile::get_strings(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) missing(*this, key);
  if (!value->is_array() || value->element_type != GgufValueType::string) wrong_type(*this, key, *value, "an array of strings");
  return value->texts;
}

const std::vector<double>& GgufFile::get_numbers(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) missing(*this, key);
  const bool numeric = value->is_array() && value->element_type != GgufValueType::string &&
                       value->element_type != GgufValueType::array;
  if (!numeric) wrong_type(*this, key, *value, "an array of numbers");
  return value->numbers;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& tensor) const {
  return reinterpret_cast<const uint8_t*>(file_->data()) + data_offset_ + tensor.offset;
}

}  // namespace ferry::io
