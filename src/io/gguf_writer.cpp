// GGUF v3 encoding and the streamed, atomic write (see gguf_writer.h).
#include "src/io/gguf_writer.h"

#include <bit>
#include <cstring>

#include "core/atomic_file_writer.h"
#include "core/error.h"

namespace ferry::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF is written little-endian; big-endian hosts are not supported");

constexpr uint32_t kGgufVersion = 3;

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_string(std::string& out, const std::string& value) {
  put<uint64_t>(out, value.size());
  out.append(value);
}

uint64_t padded(uint64_t size) { return (size + kGgufAlignment - 1) / kGgufAlignment * kGgufAlignment; }

}  // namespace

void GgufWriter::begin_key(const std::string& key, GgufValueType type) {
  FERRY_CHECK(keys_.insert(key).second, "GGUF metadata key added twice: ", key);
  put_string(metadata_, key);
  put<uint32_t>(metadata_, static_cast<uint32_t>(type));
  ++metadata_count_;
}

void GgufWriter::add_uint32(const std::string& key, uint32_t value) {
  begin_key(key, GgufValueType::uint32);
  put(metadata_, value);
}

void GgufWriter::add_int32(const std::string& key, int32_t value) {
  begin_key(key, GgufValueType::int32);
  put(metadata_, value);
}

void GgufWriter::add_uint64(const std::string& key, uint64_t value) {
  begin_key(key, GgufValueType::uint64);
  put(metadata_, value);
}

void GgufWriter::add_float32(const std::string& key, float value) {
  begin_key(key, GgufValueType::float32);
  put(metadata_, value);
}

void GgufWriter::add_bool(const std::string& key, bool value) {
  begin_key(key, GgufValueType::boolean);
  put<uint8_t>(metadata_, value ? 1 : 0);
}

void GgufWriter::add_string(const std::string& key, const std::string& value) {
  begin_key(key, GgufValueType::string);
  put_string(metadata_, value);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  begin_key(key, GgufValueType::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::string));
  put<uint64_t>(metadata_, values.size());
  for (const auto& value : values) put_string(metadata_, value);
}

void GgufWriter::add_float32_array(const std::string& key, const std::vector<float>& values) {
  begin_key(key, GgufValueType::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::float32));
  put<uint64_t>(metadata_, values.size());
  for (const float value : values) put(metadata_, value);
}

void GgufWriter::add_int32_array(const std::string& key, const std::vector<int32_t>& values) {
  begin_key(key, GgufValueType::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::int32));
  put<uint64_t>(metadata_, values.size());
  for (const int32_t value : values) put(metadata_, value);
}

void GgufWriter::add_bool_array(const std::string& key, const std::vector<bool>& values) {
  begin_key(key, GgufValueType::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::boolean));
  put<uint64_t>(metadata_, values.size());
  for (const bool value : values) put<uint8_t>(metadata_, value ? 1 : 0);
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                            TensorProducer produce) {
  FERRY_CHECK(tensor_names_.insert(name).second, "GGUF tensor added twice: ", name);
  FERRY_CHECK(!shape.empty() && shape.size() <= 4, "GGUF tensors have 1 to 4 dimensions; ", name, " has ",
              shape.size());
  int64_t elements = 1;
  for (const int64_t d : shape) {
    FERRY_CHECK(d > 0, "tensor ", name, " has an empty dimension");
    elements *= d;
  }
  if (type == GgmlType::q8_0) {
    FERRY_CHECK(shape.back() % kQ8_0BlockSize == 0, "Q8_0 rows must be a multiple of 32 elements: ", name);
  }
  const uint64_t nbytes = ggml_nbytes(type, elements);
  tensors_.push_back({name, shape, type, data_bytes_, nbytes, std::move(produce)});
  data_bytes_ += padded(nbytes);
}

uint64_t GgufWriter::write(const std::filesystem::path& path) const {
  std::string header;
  header.append("GGUF", 4);
  put<uint32_t>(header, kGgufVersion);
  put<uint64_t>(header, tensors_.size());
  put<uint64_t>(header, metadata_count_);
  header.append(metadata_);
  for (const auto& tensor : tensors_) {
    put_string(header, tensor.name);
    put<uint32_t>(header, static_cast<uint32_t>(tensor.shape.size()));
    for (auto d = tensor.shape.rbegin(); d != tensor.shape.rend(); ++d) {  // ggml order: innermost first
      put<uint64_t>(header, static_cast<uint64_t>(*d));
    }
    put<uint32_t>(header, static_cast<uint32_t>(tensor.type));
    put<uint64_t>(header, tensor.offset);
  }
  header.resize(padded(header.size()), '\0');

  AtomicFileWriter file(path);
  file.write(header.data(), header.size());
  const std::string zeros(kGgufAlignment, '\0');
  for (const auto& tensor : tensors_) {
    at::Tensor data = tensor.produce();  // the only tensor held converted at this point
    FERRY_CHECK(data.defined() && data.device().is_cpu() && data.is_contiguous(), "tensor ", tensor.name,
                ": the producer must return a contiguous CPU tensor");
    const uint64_t nbytes = static_cast<uint64_t>(data.numel()) * data.element_size();
    FERRY_CHECK(nbytes == tensor.nbytes, "tensor ", tensor.name, ": producer gave ", nbytes, " bytes, expected ",
                tensor.nbytes);
    file.write(data.data_ptr(), nbytes);
    file.write(zeros.data(), padded(nbytes) - nbytes);
  }
  file.commit();
  return header.size() + data_bytes_;
}

}  // namespace ferry::io
