// CPUID-based feature detection, with an environment cap for testing slower paths.
#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ferry::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// F16C (CPUID leaf 1, ECX bit 29) read directly: clang before 15 has no "f16c" for
// __builtin_cpu_supports.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

CpuFeatures detect_hardware() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = f.avx512f && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  f.avx512bf16 = f.avx512f && __builtin_cpu_supports("avx512bf16");
#endif
  return f;
}

const CpuFeatures& hardware_features() {
  static const CpuFeatures features = detect_hardware();
  return features;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f = hardware_features();
    // A cap from the environment lets tests and benchmarks exercise the narrower paths.
    if (const char* cap = std::getenv("FERRY_SIMD")) {
      const std::string_view c(cap);
      if (c == "scalar") f = CpuFeatures{};
      if (c == "avx2") f.avx512f = f.avx512bw = f.avx512bf16 = false;
    }
    return f;
  }();
  return features;
}

bool cpu_supports(SimdLevel level) {
  const CpuFeatures& f = hardware_features();
  switch (level) {
    case SimdLevel::scalar: return true;
    case SimdLevel::avx2: return f.avx2;
    case SimdLevel::avx512: return f.avx2 && f.avx512f && f.avx512bw;
  }
  return false;
}

SimdLevel best_simd_level() {
  const CpuFeatures& f = cpu_features();
  if (f.avx2 && f.avx512f && f.avx512bw) return SimdLevel::avx512;
  if (f.avx2) return SimdLevel::avx2;
  return SimdLevel::scalar;
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return "scalar";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
  }
  return "unknown";
}

std::string simd_level() { return simd_level_name(best_simd_level()); }

}  // namespace ferry::kernels
