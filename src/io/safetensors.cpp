// Safetensors reading (validate everything, then map) and writing (sorted, padded, atomic).
#include "src/io/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "core/atomic_file_writer.h"
#include "core/error.h"
#include "src/io/mapped_file.h"

namespace ferry::io {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// The reference implementation refuses headers over 100 MB; a real header is a few hundred KB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeName {
  const char* name;
  at::ScalarType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat},  {"F16", at::kHalf},   {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},    {"I16", at::kShort},  {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},  {"F8_E4M3", at::ScalarType::Float8_e4m3fn},
    {"F8_E5M2", at::ScalarType::Float8_e5m2},
};

std::string readable_dtype_list() {
  std::string out;
  for (const auto& d : kDtypes) {
    if (!out.empty()) out.push_back(' ');
    out.append(d.name);
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

std::string span_string(uint64_t begin, uint64_t end) {
  std::ostringstream out;
  out << "[" << begin << ", " << end << "]";
  return out.str();
}

[[noreturn]] void corrupt(const std::filesystem::path& file, const std::string& problem) {
  throw InputError(file.string() + ": " + problem);
}

// Reads one tensor entry of the header, checking its own consistency (not yet its placement).
TensorInfo parse_entry(const std::filesystem::path& file, const std::string& name, const nlohmann::json& entry) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.is_object()) corrupt(file, where + " has a header entry that is not a JSON object; the file is corrupt");
  TensorInfo info;

  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) corrupt(file, where + " has no \"dtype\" string; the file is corrupt");
  const auto& dtype_name = dtype->get_ref<const std::string&>();
  const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeName& d) { return dtype_name == d.name; });
  if (known == std::end(kDtypes)) {
    corrupt(file, where + " has dtype '" + dtype_name + "', which Ferry cannot read (supported: " + readable_dtype_list() +
                      "); convert the checkpoint to one of these dtypes");
  }
  info.dtype = known->dtype;

  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) corrupt(file, where + " has no \"shape\" array; the file is corrupt");
  uint64_t numel = 1;
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned()) corrupt(file, where + " has a shape entry that is not a non-negative integer: " + shape->dump());
    const auto size = dim.get<uint64_t>();
    if (size > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, size, &numel)) {
      corrupt(file, where + " has an impossibly large shape " + shape->dump() + "; the file is corrupt");
    }
    info.shape.push_back(static_cast<int64_t>(size));
  }

  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    corrupt(file, where + " has no \"data_offsets\" pair of non-negative integers; the file is corrupt");
  }
  info.begin = (*offsets)[0].get<uint64_t>();
  info.end = (*offsets)[1].get<uint64_t>();
  if (info.begin > info.end) {
    corrupt(file, where + " has data_offsets " + span_string(info.begin, info.end) +
                      " out of order (begin after end); the file is corrupt");
  }

  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(c10::elementSize(info.dtype)), &nbytes) ||
      nbytes != info.nbytes()) {
    corrupt(file, where + " has dtype " + dtype_name + " and shape " + shape_string(info.shape) + " (" +
                      std::to_string(numel) + " elements of " + std::to_string(c10::elementSize(info.dtype)) +
                      " bytes) but data_offsets " + span_string(info.begin, info.end) + " span " +
                      std::to_string(info.nbytes()) + " bytes; the file is corrupt");
  }
  return info;
}

// Every tensor inside the data section, and together they tile it exactly: no overlap, no gap,
// nothing left over. (The same rule as the reference implementation.)
void check_placement(const std::filesystem::path& file, const std::map<std::string, TensorInfo>& infos, uint64_t data_size) {
  std::vector<std::pair<const std::string*, const TensorInfo*>> by_offset;
  for (const auto& [name, info] : infos) {
    if (info.end > data_size) {
      corrupt(file, "tensor '" + name + "' data_offsets " + span_string(info.begin, info.end) + " exceed the data section (" +
                        std::to_string(data_size) + " bytes); the file is truncated or corrupt");
    }
    by_offset.emplace_back(&name, &info);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) {
    return std::pair(a.second->begin, a.second->end) < std::pair(b.second->begin, b.second->end);
  });
  uint64_t expected = 0;
  const std::string* previous = nullptr;
  for (const auto& [name, info] : by_offset) {
    if (info->begin < expected) {
      corrupt(file, "tensor '" + *name + "' data_offsets " + span_string(info->begin, info->end) + " overlap tensor '" +
                        *previous + "' (which ends at byte " + std::to_string(expected) + "); the file is corrupt");
    }
    if (info->begin > expected) {
      corrupt(file, "there are " + std::to_string(info->begin - expected) + " unused bytes before tensor '" + *name +
                        "' (data_offsets " + span_string(info->begin, info->end) + ", previous data ends at byte " +
                        std::to_string(expected) + "); the file is corrupt");
    }
    expected = info->end;
    previous = name;
  }
  if (expected != data_size) {
    corrupt(file, "the data section has " + std::to_string(data_size - expected) +
                      " bytes after the last tensor that no header entry describes; the file is corrupt");
  }
}

}  // namespace

std::string safetensors_dtype_name(at::ScalarType dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  throw InputError(std::string("dtype ") + c10::toString(dtype) + " cannot be stored in safetensors by Ferry (supported: " +
                   readable_dtype_list() + ")");
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& file) {
  mapping_ = MappedFile::open(file);
  const uint64_t file_size = mapping_->size();
  if (file_size < 8) {
    corrupt(file, "the file is " + std::to_string(file_size) +
                      " bytes, too short for the 8-byte header length; it is truncated or not a safetensors file");
  }
  uint64_t header_size = 0;
  std::memcpy(&header_size, mapping_->data(), 8);
  if (header_size > file_size - 8) {
    corrupt(file, "the header length " + std::to_string(header_size) + " exceeds the file (" + std::to_string(file_size) +
                      " bytes); the file is truncated or not a safetensors file");
  }
  if (header_size > kMaxHeaderBytes) {
    corrupt(file, "the header length " + std::to_string(header_size) + " is over the 100 MB limit; not a safetensors file");
  }
  const auto* header_begin = reinterpret_cast<const char*>(mapping_->data()) + 8;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_size);
  } catch (const nlohmann::json::exception& e) {
    corrupt(file, std::string("the header is not valid JSON (") + e.what() + "); the file is corrupt or not a safetensors file");
  }
  if (!header.is_object()) corrupt(file, "the header is not a JSON object; the file is corrupt or not a safetensors file");

  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object()) corrupt(file, "\"__metadata__\" is not a JSON object; the file is corrupt");
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          corrupt(file, "\"__metadata__\" entry '" + meta_key + "' is not a string (it is " + meta_value.dump() +
                            "); safetensors metadata maps strings to strings");
        }
        metadata_[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    infos_.emplace(key, parse_entry(file, key, value));
    names_.push_back(key);
  }
  data_offset_ = 8 + header_size;
  check_placement(file, infos_, file_size - data_offset_);
  std::sort(names_.begin(), names_.end());
}

const std::filesystem::path& SafetensorsFile::path() const { return mapping_->path(); }

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto found = infos_.find(name);
  if (found == infos_.end()) throw InputError(path().string() + ": has no tensor '" + name + "'");
  return found->second;
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorInfo& entry = info(name);
  std::byte* bytes = mapping_->data() + data_offset_ + entry.begin;
  const auto options = at::TensorOptions().dtype(entry.dtype).device(at::kCPU);
  if (entry.nbytes() == 0) return at::empty(entry.shape, options);
  if (!mapping_->writable() || reinterpret_cast<uintptr_t>(bytes) % c10::elementSize(entry.dtype) != 0) return load(name);
  auto keep_alive = mapping_;
  return at::from_blob(bytes, entry.shape, [keep_alive](void*) {}, options);
}

at::Tensor SafetensorsFile::load(const std::string& name) const {
  const TensorInfo& entry = info(name);
  at::Tensor out = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype).device(at::kCPU));
  if (entry.nbytes() > 0) std::memcpy(out.data_ptr(), mapping_->data() + data_offset_ + entry.begin, entry.nbytes());
  return out;
}

TensorMap SafetensorsFile::load_all() const {
  TensorMap out;
  for (const auto& name : names_) out.emplace(name, load(name));
  return out;
}

TensorMap load_safetensors(const std::filesystem::path& file) { return SafetensorsFile(file).load_all(); }

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& file, const std::vector<TensorSlot>& slots,
                                     const std::map<std::string, std::string>& metadata)
    : file_(file) {
  std::vector<const TensorSlot*> sorted;
  for (const TensorSlot& slot : slots) sorted.push_back(&slot);
  std::sort(sorted.begin(), sorted.end(), [](const TensorSlot* a, const TensorSlot* b) { return a->name < b->name; });
  nlohmann::ordered_json header;
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  if (metadata.count("format") == 0) meta["format"] = "pt";
  for (const auto& [key, value] : metadata) meta[key] = value;
  header["__metadata__"] = std::move(meta);
  uint64_t offset = 0;
  for (const TensorSlot* slot : sorted) {
    const std::string& name = slot->name;
    if (name == "__metadata__") throw InputError(file.string() + ": a tensor cannot be named \"__metadata__\"");
    if (spans_.count(name) != 0) throw InternalError(file.string() + ": tensor '" + name + "' given twice");
    std::string dtype_name;
    try {
      dtype_name = safetensors_dtype_name(slot->dtype);
    } catch (const InputError& e) {
      throw InputError(file.string() + ": cannot save tensor '" + name + "': " + e.what());
    }
    uint64_t numel = 1;
    for (int64_t d : slot->shape) numel *= static_cast<uint64_t>(d);
    const uint64_t nbytes = numel * c10::elementSize(slot->dtype);
    header[name] = {{"dtype", dtype_name}, {"shape", slot->shape}, {"data_offsets", {offset, offset + nbytes}}};
    spans_[name] = {offset, nbytes};
    offset += nbytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  data_offset_ = 8 + header_text.size();
  data_bytes_ = offset;
  out_ = std::make_unique<AtomicFileWriter>(file, data_offset_ + offset);
  const uint64_t header_size = header_text.size();
  out_->write(&header_size, 8);
  out_->write(header_text.data(), header_text.size());
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::write(const std::string& name, uint64_t byte_offset, const void* data, size_t size) {
  auto it = spans_.find(name);
  FERRY_CHECK(it != spans_.end(), file_.string(), ": no tensor '", name, "' in the header");
  FERRY_CHECK(byte_offset + size <= it->second.second, file_.string(), ": write past the end of '", name, "'");
  if (size == 0) return;
  out_->write_at(data_offset_ + it->second.first + byte_offset, data, size);
  written_ += size;
}

void SafetensorsWriter::commit() {
  FERRY_CHECK(written_ == data_bytes_, file_.string(), ": ", written_, " of ", data_bytes_, " data bytes written");
  out_->commit();
}

void save_safetensors(const std::filesystem::path& file, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Header first, from sizes alone, so device tensors are copied to the host one at a time below.
  std::vector<TensorSlot> slots;
  for (const auto& [name, tensor] : tensors) {
    FERRY_CHECK(tensor.defined(), "tensor '", name, "' is undefined");
    slots.push_back({name, tensor.scalar_type(), tensor.sizes().vec()});
  }
  SafetensorsWriter out(file, slots, metadata);
  for (const auto& [name, tensor] : tensors) {
    if (tensor.numel() == 0) continue;
    const at::Tensor host = tensor.detach().to(at::kCPU).contiguous();
    out.write(name, 0, host.data_ptr(), static_cast<size_t>(host.numel()) * host.element_size());
  }
  out.commit();
}

}  // namespace ferry::io
