// Which SIMD instruction sets this CPU offers, read once from CPUID. Kernels pick their fastest
// path from this at run time, so one binary runs everywhere and uses AVX-512 where it exists.
#pragma once

#include <string>

namespace ferry::kernels {

struct CpuFeatures {
  bool avx2 = false;      // AVX2 + FMA + F16C (every AVX2 CPU has all three; kernels rely on F16C)
  bool avx512f = false;   // AVX-512 Foundation
  bool avx512bw = false;  // AVX-512 byte/word ops + vector-length extension (16-bit masked loads)
  bool avx512bf16 = false;
};

const CpuFeatures& cpu_features();

// The SIMD paths a kernel can be compiled for, narrowest first (so levels compare with <).
enum class SimdLevel { scalar = 0, avx2 = 1, avx512 = 2 };

// The widest level the kernels will use here: avx512 needs AVX-512 F+BW+VL, avx2 needs
// AVX2+FMA+F16C. FERRY_SIMD=scalar|avx2 in the environment caps it (read once, at first use).
SimdLevel best_simd_level();

// True when this CPU can run code compiled for `level` (ignores the FERRY_SIMD cap), so tests
// can run every path the hardware has regardless of the environment.
bool cpu_supports(SimdLevel level);

// "scalar", "avx2", "avx512".
const char* simd_level_name(SimdLevel level);

// "avx512", "avx2" or "scalar": simd_level_name(best_simd_level()).
std::string simd_level();

}  // namespace ferry::kernels
