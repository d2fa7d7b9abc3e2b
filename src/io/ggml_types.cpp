// The ggml type table (see ggml_types.h).
#include "src/io/ggml_types.h"

#include <iterator>

#include "core/error.h"

namespace ferry::io {
namespace {

constexpr GgmlTypeTraits kTypes[] = {
    {GgmlType::f32, "F32", 1, 4},      {GgmlType::f16, "F16", 1, 2},
    {GgmlType::bf16, "BF16", 1, 2},    {GgmlType::q4_0, "Q4_0", 32, 18},
    {GgmlType::q4_1, "Q4_1", 32, 20},  {GgmlType::q5_0, "Q5_0", 32, 22},
    {GgmlType::q5_1, "Q5_1", 32, 24},  {GgmlType::q8_0, "Q8_0", 32, 34},
    {GgmlType::q2_k, "Q2_K", 256, 84}, {GgmlType::q3_k, "Q3_K", 256, 110},
    {GgmlType::q4_k, "Q4_K", 256, 144}, {GgmlType::q5_k, "Q5_K", 256, 176},
    {GgmlType::q6_k, "Q6_K", 256, 210},
};

}  // namespace

const GgmlTypeTraits* find_ggml_type(uint32_t value) {
  for (const auto& traits : kTypes) {
    if (static_cast<uint32_t>(traits.type) == value) return &traits;
  }
  return nullptr;
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) {
  const GgmlTypeTraits* traits = find_ggml_type(static_cast<uint32_t>(type));
  FERRY_CHECK(traits != nullptr, "unknown ggml type ", static_cast<uint32_t>(type));
  return *traits;
}

std::string ggml_type_name(uint32_t value) {
  const GgmlTypeTraits* traits = find_ggml_type(value);
  return traits != nullptr ? traits->name : "type " + std::to_string(value);
}

std::string ggml_type_name(GgmlType type) { return ggml_type_name(static_cast<uint32_t>(type)); }

std::string ggml_supported_type_names() {
  std::string names;
  for (const auto& traits : kTypes) names += (names.empty() ? "" : ", ") + std::string(traits.name);
  return names;
}

uint64_t ggml_nbytes(GgmlType type, int64_t elements) {
  FERRY_CHECK(elements >= 0);
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  FERRY_CHECK(elements % traits.block_elements == 0, ggml_type_name(type), " needs a multiple of ",
              traits.block_elements, " elements, got ", elements);
  return static_cast<uint64_t>(elements / traits.block_elements) * traits.block_bytes;
}

double ggml_bits_per_weight(GgmlType type) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  return 8.0 * static_cast<double>(traits.block_bytes) / static_cast<double>(traits.block_elements);
}

}  // namespace ferry::io
