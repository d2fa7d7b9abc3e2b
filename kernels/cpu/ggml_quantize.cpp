// ggml block quantisation (see ggml_quantize.h): argument checks, the choice of path and the split
// of a tensor's blocks across threads.
#include "kernels/cpu/ggml_quantize.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/ggml_quantize_internal.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

using ggml_detail::QuantizeRange;

QuantizeRange reference_kernel(GgmlQuantType type) {
  switch (type) {
    case GgmlQuantType::q4_0: return ggml_detail::quantize_range_q4_0;
    case GgmlQuantType::q5_0: return ggml_detail::quantize_range_q5_0;
    case GgmlQuantType::q5_1: return ggml_detail::quantize_range_q5_1;
    case GgmlQuantType::q8_0: return ggml_detail::quantize_range_q8_0;
    case GgmlQuantType::q4_k: return ggml_detail::quantize_range_q4_k;
    case GgmlQuantType::q5_k: return ggml_detail::quantize_range_q5_k;
    case GgmlQuantType::q6_k: return ggml_detail::quantize_range_q6_k;
  }
  FERRY_CHECK(false, "unknown ggml quant type ", static_cast<int>(type));
  return nullptr;
}

// The K types' fits are the work (20-odd passes over every value); the 32-value types are one pass
// and stay on the definition at every level.
QuantizeRange kernel_for(SimdLevel level, GgmlQuantType type) {
  if (level >= SimdLevel::avx512) {
    if (type == GgmlQuantType::q4_k) return ggml_detail::quantize_range_q4_k_avx512;
    if (type == GgmlQuantType::q5_k) return ggml_detail::quantize_range_q5_k_avx512;
    if (type == GgmlQuantType::q6_k) return ggml_detail::quantize_range_q6_k_avx512;
  } else if (level == SimdLevel::avx2) {
    if (type == GgmlQuantType::q4_k) return ggml_detail::quantize_range_q4_k_avx2;
    if (type == GgmlQuantType::q5_k) return ggml_detail::quantize_range_q5_k_avx2;
    if (type == GgmlQuantType::q6_k) return ggml_detail::quantize_range_q6_k_avx2;
  }
  return reference_kernel(type);
}

void check_arguments(GgmlQuantType type, const float* x, int64_t n, const uint8_t* out) {
  const GgmlQuantBlock block = ggml_quant_block(type);
  FERRY_CHECK(n >= 0 && n % block.elements == 0, ggml_quant_type_name(type), " quantises whole blocks of ",
              block.elements, " values, got ", n);
  FERRY_CHECK(n == 0 || (x != nullptr && out != nullptr), "ggml_quantize: a null buffer");
}

// Blocks per range handed to a thread: about 16K values (a K block costs ~20 us, a 32-value one
// well under 1 us, so either way a range is long next to a wake-up).
constexpr int64_t kGrainValues = 16384;

}  // namespace

GgmlQuantBlock ggml_quant_block(GgmlQuantType type) {
  switch (type) {
    case GgmlQuantType::q4_0: return {32, 18};
    case GgmlQuantType::q5_0: return {32, 22};
    case GgmlQuantType::q5_1: return {32, 24};
    case GgmlQuantType::q8_0: return {32, 34};
    case GgmlQuantType::q4_k: return {256, 144};
    case GgmlQuantType::q5_k: return {256, 176};
    case GgmlQuantType::q6_k: return {256, 210};
  }
  FERRY_CHECK(false, "unknown ggml quant type ", static_cast<int>(type));
  return {1, 1};
}

const char* ggml_quant_type_name(GgmlQuantType type) {
  switch (type) {
    case GgmlQuantType::q4_0: return "Q4_0";
    case GgmlQuantType::q5_0: return "Q5_0";
    case GgmlQuantType::q5_1: return "Q5_1";
    case GgmlQuantType::q8_0: return "Q8_0";
    case GgmlQuantType::q4_k: return "Q4_K";
    case GgmlQuantType::q5_k: return "Q5_K";
    case GgmlQuantType::q6_k: return "Q6_K";
  }
  return "?";
}

void ggml_quantize_reference(GgmlQuantType type, const float* x, int64_t n, uint8_t* out) {
  check_arguments(type, x, n, out);
  if (n == 0) return;
  reference_kernel(type)(x, 0, n / ggml_quant_block(type).elements, out);
}

void ggml_quantize_at(SimdLevel level, GgmlQuantType type, const float* x, int64_t n, uint8_t* out) {
  FERRY_CHECK(cpu_supports(level), "this CPU cannot run the ", simd_level_name(level), " path");
  check_arguments(type, x, n, out);
  if (n == 0) return;
  kernel_for(level, type)(x, 0, n / ggml_quant_block(type).elements, out);
}

void ggml_quantize(GgmlQuantType type, const float* x, int64_t n, uint8_t* out, ThreadPool* pool) {
  check_arguments(type, x, n, out);
  if (n == 0) return;
  const GgmlQuantBlock block = ggml_quant_block(type);
  const int64_t blocks = n / block.elements;
  const QuantizeRange kernel = kernel_for(best_simd_level(), type);
  const int64_t grain = std::max<int64_t>(1, kGrainValues / block.elements);
  if (blocks <= grain) {
    kernel(x, 0, blocks, out);
    return;
  }
  if (pool == nullptr) pool = &default_thread_pool();
  pool->parallel_for(blocks, grain, [&](int64_t begin, int64_t end) { kernel(x, begin, end, out); });
}

}  // namespace ferry::kernels
