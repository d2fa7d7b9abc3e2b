// CPUID-based feature detection, with an environment cap for testing slower paths.
#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <string_view>

namespace ferry::kernels {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bf16 = f.avx512f && __builtin_cpu_supports("avx512bf16");
#endif
    // A cap from the environment lets tests and benchmarks exercise the narrower paths.
    if (const char* cap = std::getenv("FERRY_SIMD")) {
      const std::string_view c(cap);
      if (c == "scalar") f = CpuFeatures{};
      if (c == "avx2") f.avx512f = f.avx512bf16 = false;
    }
    return f;
  }();
  return features;
}

std::string simd_level() {
  const auto& f = cpu_features();
  return f.avx512f ? "avx512" : f.avx2 ? "avx2" : "scalar";
}

}  // namespace ferry::kernels
