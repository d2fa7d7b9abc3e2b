// bitsandbytes' NF4 code book (get_4bit_type("nf4")) as exact fp32 literals: the one copy the CPU
// kernels (kernels/cpu/nf4.cpp) and the CUDA kernel (kernels/cuda/nf4_dequant.cu, which needs them
// in __constant__ memory) both initialise their tables from. No includes: nvcc reads it too.
#pragma once

#define FERRY_NF4_CODE_BOOK                                                                        \
  -0x1p+0f, -0x1.647362p-1f, -0x1.0cd66p-1f, -0x1.94654p-2f, -0x1.23449ap-2f, -0x1.7a6a7ep-3f,      \
      -0x1.74f0e2p-4f, 0.0f, 0x1.45f5fep-4f, 0x1.4995c6p-3f, 0x1.f809bap-3f, 0x1.5a0674p-2f,        \
      0x1.c3497p-2f, 0x1.200f56p-1f, 0x1.722766p-1f, 0x1p+0f
