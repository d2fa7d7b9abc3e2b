// Which SIMD instruction sets this CPU offers, read once from CPUID. Kernels pick their fastest
// path from this at run time, so one binary runs everywhere and uses AVX-512 where it exists.
#pragma once

#include <string>

namespace ferry::kernels {

struct CpuFeatures {
  bool avx2 = false;      // AVX2 + FMA
  bool avx512f = false;   // AVX-512 Foundation
  bool avx512bf16 = false;
};

const CpuFeatures& cpu_features();

// "avx512", "avx2" or "scalar": the widest path the kernels will use here. FERRY_SIMD=scalar|avx2
// in the environment caps it (for testing each path on one machine).
std::string simd_level();

}  // namespace ferry::kernels
