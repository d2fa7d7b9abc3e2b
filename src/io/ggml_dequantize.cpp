// Dequantisation of ggml blocks to float32, bit for bit as gguf-py's gguf.quants.dequantize (see
// ggml_dequantize.h). One `block` function per type writes one block's floats with gguf-py's
// arithmetic, inlined into the row loop; the compiler vectorises its fixed-length inner loops
// (baseline target: SSE2 on x86-64. An AVX2 clone of the same loops was tried and was not faster
// overall: GCC 12 vectorised some unpacking loops worse for it, and a large tensor is bound by
// writing its floats to memory anyway).
//
// Float rounding: numpy evaluates `(d * q) + m` as a product, then a sum; the kernels write it the
// same way. The products are exact (ggml_dequantize.h), so each element is rounded once, and an FMA
// or another operation order would give the same bits.
#include "src/io/ggml_dequantize.h"

#include <array>
#include <bit>
#include <cstring>

#include "core/error.h"

#define FERRY_DEQUANT_INLINE [[gnu::always_inline]] inline

namespace ferry::io {
namespace {

FERRY_DEQUANT_INLINE uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

FERRY_DEQUANT_INLINE uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// IEEE half -> float, exact for every bit pattern (NaN payloads kept, signalling NaNs not quieted,
// as numpy's astype(float32) does), written with selects only so F16 rows vectorise.
FERRY_DEQUANT_INLINE float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t magnitude = uint32_t(h & 0x7fffu) << 13;  // exponent and mantissa at fp32 places
  const uint32_t exponent = magnitude & 0x0f800000u;
  const uint32_t normal = magnitude + (112u << 23);  // rebias 15 -> 127
  const uint32_t inf_nan = magnitude | 0x7f800000u;  // exponent 31 -> 255, mantissa kept
  // Subnormal m * 2^-24: (1 + m/1024) * 2^-14 - 2^-14, both exact in fp32.
  const uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(magnitude + (113u << 23)) -
                                                     std::bit_cast<float>(113u << 23));
  const uint32_t bits = exponent == 0 ? subnormal : exponent == 0x0f800000u ? inf_nan : normal;
  return std::bit_cast<float>(sign | bits);
}

FERRY_DEQUANT_INLINE float load_half(const uint8_t* p) { return half_to_float(load_u16(p)); }

// Each kernel: kElements floats from kBytes bytes. Layouts as in ggml_types.h; the comments give
// gguf-py's expression (quants.py) each one follows.

struct F16Kernel {
  static constexpr int64_t kElements = 1, kBytes = 2;
  // data.view(np.float16).astype(np.float32)
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    y[0] = load_half(x);
  }
};

struct Bf16Kernel {
  static constexpr int64_t kElements = 1, kBytes = 2;
  // (blocks.view(np.int16).astype(np.int32) << 16).view(np.float32): the bits, shifted
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    y[0] = std::bit_cast<float>(uint32_t(load_u16(x)) << 16);
  }
};

// Every quantised kernel works in two steps the vectoriser handles well: unpack the block's bits
// into one byte per element (byte-wide shifts and masks), then per group of elements sharing a
// scale, widen the bytes to float and scale them (the group's arithmetic in gguf-py's order).

// y[l] = scale * float(q[l] - offset) for kCount elements.
template <int kCount>
FERRY_DEQUANT_INLINE void scale_group(const uint8_t* __restrict q, int offset, float scale, float* __restrict y) {
  for (int l = 0; l < kCount; ++l) y[l] = scale * float(int(q[l]) - offset);
}

// y[l] = (scale * float(q[l])) + add: two roundings, as numpy's `(d * q) + m` (Q4_1, Q5_1).
template <int kCount>
FERRY_DEQUANT_INLINE void scale_add_group(const uint8_t* __restrict q, float scale, float add, float* __restrict y) {
  for (int l = 0; l < kCount; ++l) {
    const float product = scale * float(q[l]);
    y[l] = product + add;
  }
}

// y[l] = (scale * float(q[l])) - min: two roundings, as numpy's `d * q - dm` (Q2_K, Q4_K, Q5_K).
template <int kCount>
FERRY_DEQUANT_INLINE void scale_sub_group(const uint8_t* __restrict q, float scale, float min, float* __restrict y) {
  for (int l = 0; l < kCount; ++l) {
    const float product = scale * float(q[l]);
    y[l] = product - min;
  }
}

// 16 bytes as one vector (GCC/Clang vector extensions: byte-wide shifts and masks on any target).
typedef uint8_t Bytes16 __attribute__((vector_size(16)));

FERRY_DEQUANT_INLINE Bytes16 load16(const uint8_t* p) {
  Bytes16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

FERRY_DEQUANT_INLINE void store16(uint8_t* p, Bytes16 v) { std::memcpy(p, &v, sizeof(v)); }

// The nibbles of 16 bytes as 32 bytes: low nibbles first (elements 0..15), then high nibbles.
FERRY_DEQUANT_INLINE void unpack_nibbles16(const uint8_t* __restrict qs, uint8_t* __restrict q) {
  const Bytes16 b = load16(qs);
  store16(q, b & 0x0f);
  store16(q + 16, b >> 4);
}

// Byte i of kBitBytes[b] is 0x10 where bit i of b is set: the fifth bit of 8 Q5 elements at once.
constexpr auto kBitBytes = [] {
  std::array<uint64_t, 256> table{};
  for (int b = 0; b < 256; ++b) {
    for (int i = 0; i < 8; ++i) {
      if ((b >> i) & 1) table[size_t(b)] |= uint64_t(0x10) << (8 * i);
    }
  }
  return table;
}();

// Q5_0 / Q5_1: element j's fifth bit is bit j of the little-endian u32 qh.
FERRY_DEQUANT_INLINE void unpack_q5(const uint8_t* __restrict qh, const uint8_t* __restrict qs, uint8_t* __restrict q) {
  uint8_t high[32];
  for (int k = 0; k < 4; ++k) std::memcpy(high + 8 * k, &kBitBytes[qh[k]], 8);
  unpack_nibbles16(qs, q);
  for (int j = 0; j < 32; ++j) q[j] |= high[j];
}

struct Q4_0Kernel {
  static constexpr int64_t kElements = 32, kBytes = 18;
  // d * ((q & 0xF) - 8); low nibbles are elements 0..15, high nibbles 16..31
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    uint8_t q[32];
    unpack_nibbles16(x + 2, q);
    scale_group<32>(q, 8, load_half(x), y);
  }
};

struct Q4_1Kernel {
  static constexpr int64_t kElements = 32, kBytes = 20;
  // (d * q) + m
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    uint8_t q[32];
    unpack_nibbles16(x + 4, q);
    scale_add_group<32>(q, load_half(x), load_half(x + 2), y);
  }
};

struct Q5_0Kernel {
  static constexpr int64_t kElements = 32, kBytes = 22;
  // d * ((nibble | bit j of qh << 4) - 16)
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    uint8_t q[32];
    unpack_q5(x + 2, x + 6, q);
    scale_group<32>(q, 16, load_half(x), y);
  }
};

struct Q5_1Kernel {
  static constexpr int64_t kElements = 32, kBytes = 24;
  // (d * q) + m, q = nibble | bit j of qh << 4
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    uint8_t q[32];
    unpack_q5(x + 4, x + 8, q);
    scale_add_group<32>(q, load_half(x), load_half(x + 2), y);
  }
};

struct Q8_0Kernel {
  static constexpr int64_t kElements = 32, kBytes = 34;
  // x * d
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    const float d = load_half(x);
    const uint8_t* qs = x + 2;
    for (int j = 0; j < 32; ++j) y[j] = float(int8_t(qs[j])) * d;
  }
};

// K-quants: 256 elements in 16 sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 8 of 32 (Q4_K, Q5_K). Each
// sub-block's scale (and min) is formed first, d * sc in fp32, then multiplies q.

struct Q2_KKernel {
  static constexpr int64_t kElements = 256, kBytes = 84;
  // dl = d * (sc & 0xF), ml = dmin * (sc >> 4) per 16 elements; y = (dl * q) - ml. Element
  // 128*h + 32*s + l is bits 2s..2s+1 of qs[32*h + l].
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    const uint8_t* scales = x;
    const uint8_t* qs = x + 16;
    const float d = load_half(x + 80);
    const float dmin = load_half(x + 82);
    uint8_t q[256];
    for (int h = 0; h < 2; ++h) {
      for (int half = 0; half < 2; ++half) {
        const Bytes16 b = load16(qs + 32 * h + 16 * half);
        uint8_t* out = q + 128 * h + 16 * half;
        store16(out, b & 3);
        store16(out + 32, (b >> 2) & 3);
        store16(out + 64, (b >> 4) & 3);
        store16(out + 96, b >> 6);
      }
    }
    for (int g = 0; g < 16; ++g) {
      const float dl = d * float(scales[g] & 0x0f);
      const float ml = dmin * float(scales[g] >> 4);
      scale_sub_group<16>(q + 16 * g, dl, ml, y + 16 * g);
    }
  }
};

struct Q3_KKernel {
  static constexpr int64_t kElements = 256, kBytes = 110;
  // 6-bit scales: low 4 bits from bytes 0..7 (low nibbles, then high nibbles), high 2 bits from
  // bytes 8..11 (bits 2*(i/4) of byte 8 + i%4); scale = int8(that) - 32, dl = d * scale.
  // y = dl * (q2 - (high bit ? 0 : 4)): element 128*h + 32*s + l has bits 2s..2s+1 of
  // qs[32*h + l] and its high bit is bit 4*h + s of hmask[l]. Unpacked as q2 | high << 2, minus 4.
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    const uint8_t* hmask = x;
    const uint8_t* qs = x + 32;
    const uint8_t* packed = x + 96;
    const float d = load_half(x + 108);
    uint8_t q[256];
    for (int half = 0; half < 2; ++half) {
      const Bytes16 hm = load16(hmask + 16 * half);
      for (int h = 0; h < 2; ++h) {
        const Bytes16 b = load16(qs + 32 * h + 16 * half);
        for (int s = 0; s < 4; ++s) {
          const Bytes16 low = (b >> (2 * s)) & 3;
          const Bytes16 high = (hm >> (4 * h + s)) & 1;
          store16(q + 128 * h + 32 * s + 16 * half, low | (high << 2));
        }
      }
    }
    for (int i = 0; i < 16; ++i) {
      const int low = i < 8 ? packed[i] & 0x0f : packed[i - 8] >> 4;
      const int high = (packed[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
      const float dl = d * float(int(int8_t(uint8_t(low | (high << 4)))) - 32);
      scale_group<16>(q + 16 * i, 4, dl, y + 16 * i);
    }
  }
};

// Q4_K / Q5_K's eight 6-bit scales and mins from 12 bytes (gguf-py's Q4_K.get_scale_min, ggml's
// get_scale_min_k4): j < 4: sc = b[j] & 63, m = b[j+4] & 63; j >= 4: sc = (b[j+4] & 0xF) |
// (b[j-4] >> 6) << 4, m = (b[j+4] >> 4) | (b[j] >> 6) << 4. Writes d * sc and dmin * m.
FERRY_DEQUANT_INLINE void k4_scales(const uint8_t* __restrict b, float d, float dmin, float* __restrict scale,
                                    float* __restrict min) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = d * float(b[j] & 63);
    min[j] = dmin * float(b[j + 4] & 63);
  }
  for (int j = 4; j < 8; ++j) {
    scale[j] = d * float((b[j + 4] & 0x0f) | ((b[j - 4] >> 6) << 4));
    min[j] = dmin * float((b[j + 4] >> 4) | ((b[j] >> 6) << 4));
  }
}

// Q4_K / Q5_K nibbles: sub-block 2c + n is nibble n of qs[32c .. 32c+31].
FERRY_DEQUANT_INLINE void unpack_k4_nibbles(const uint8_t* __restrict qs, uint8_t* __restrict q) {
  for (int c = 0; c < 4; ++c) {
    for (int half = 0; half < 2; ++half) {
      const Bytes16 b = load16(qs + 32 * c + 16 * half);
      store16(q + 64 * c + 16 * half, b & 0x0f);
      store16(q + 64 * c + 32 + 16 * half, b >> 4);
    }
  }
}

struct Q4_KKernel {
  static constexpr int64_t kElements = 256, kBytes = 144;
  // y = (d*sc * q) - dmin*m per 32 elements
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    float scale[8], min[8];
    k4_scales(x + 4, load_half(x), load_half(x + 2), scale, min);
    uint8_t q[256];
    unpack_k4_nibbles(x + 16, q);
    for (int j = 0; j < 8; ++j) scale_sub_group<32>(q + 32 * j, scale[j], min[j], y + 32 * j);
  }
};

struct Q5_KKernel {
  static constexpr int64_t kElements = 256, kBytes = 176;
  // as Q4_K with q = nibble | (bit j of qh[l]) << 4 for sub-block j
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    float scale[8], min[8];
    k4_scales(x + 4, load_half(x), load_half(x + 2), scale, min);
    const uint8_t* qh = x + 16;
    uint8_t q[256];
    unpack_k4_nibbles(x + 48, q);
    for (int half = 0; half < 2; ++half) {
      const Bytes16 high = load16(qh + 16 * half);
      for (int j = 0; j < 8; ++j) {
        uint8_t* out = q + 32 * j + 16 * half;
        store16(out, load16(out) | (((high >> j) & 1) << 4));
      }
    }
    for (int j = 0; j < 8; ++j) scale_sub_group<32>(q + 32 * j, scale[j], min[j], y + 32 * j);
  }
};

struct Q6_KKernel {
  static constexpr int64_t kElements = 256, kBytes = 210;
  // ds = d * int8 scale per 16 elements; y = ds * (q - 32), q = 4 low bits | 2 high bits << 4.
  // Element 128*h + 32*s + l: low bits are nibble s/2 of ql[64*h + 32*(s%2) + l], high bits are
  // bits 2s..2s+1 of qh[32*h + l].
  FERRY_DEQUANT_INLINE static void block(const uint8_t* __restrict x, float* __restrict y) {
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const uint8_t* scales = x + 192;
    const float d = load_half(x + 208);
    uint8_t q[256];
    for (int h = 0; h < 2; ++h) {
      for (int half = 0; half < 2; ++half) {
        const Bytes16 a = load16(ql + 64 * h + 16 * half), b = load16(ql + 64 * h + 32 + 16 * half);
        const Bytes16 high = load16(qh + 32 * h + 16 * half);
        uint8_t* out = q + 128 * h + 16 * half;
        store16(out, (a & 0x0f) | ((high & 3) << 4));
        store16(out + 32, (b & 0x0f) | (((high >> 2) & 3) << 4));
        store16(out + 64, (a >> 4) | (((high >> 4) & 3) << 4));
        store16(out + 96, (b >> 4) | ((high >> 6) << 4));
      }
    }
    for (int g = 0; g < 16; ++g) scale_group<16>(q + 16 * g, 32, d * float(int8_t(scales[g])), y + 16 * g);
  }
};

template <class Kernel>
FERRY_DEQUANT_INLINE void run_blocks(const uint8_t* __restrict x, int64_t blocks, float* __restrict y) {
  for (int64_t i = 0; i < blocks; ++i) Kernel::block(x + i * Kernel::kBytes, y + i * Kernel::kElements);
}

int64_t whole_blocks(GgmlType type, int64_t elements) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  FERRY_CHECK(elements >= 0 && elements % traits.block_elements == 0, "dequantize_row: ", traits.name,
              " needs a whole number of ", traits.block_elements, "-element blocks, got ", elements,
              " elements");
  return elements / traits.block_elements;
}

}  // namespace

void dequantize_row(GgmlType type, const void* blocks, int64_t elements, float* out) {
  const int64_t count = whole_blocks(type, elements);
  const auto* x = static_cast<const uint8_t*>(blocks);
  switch (type) {
    case GgmlType::f32: std::memcpy(out, x, size_t(count) * sizeof(float)); return;
    case GgmlType::f16: run_blocks<F16Kernel>(x, count, out); return;
    case GgmlType::bf16: run_blocks<Bf16Kernel>(x, count, out); return;
    case GgmlType::q4_0: run_blocks<Q4_0Kernel>(x, count, out); return;
    case GgmlType::q4_1: run_blocks<Q4_1Kernel>(x, count, out); return;
    case GgmlType::q5_0: run_blocks<Q5_0Kernel>(x, count, out); return;
    case GgmlType::q5_1: run_blocks<Q5_1Kernel>(x, count, out); return;
    case GgmlType::q8_0: run_blocks<Q8_0Kernel>(x, count, out); return;
    case GgmlType::q2_k: run_blocks<Q2_KKernel>(x, count, out); return;
    case GgmlType::q3_k: run_blocks<Q3_KKernel>(x, count, out); return;
    case GgmlType::q4_k: run_blocks<Q4_KKernel>(x, count, out); return;
    case GgmlType::q5_k: run_blocks<Q5_KKernel>(x, count, out); return;
    case GgmlType::q6_k: run_blocks<Q6_KKernel>(x, count, out); return;
  }
  FERRY_CHECK(false, "dequantize_row: no kernel for ggml type ", static_cast<uint32_t>(type));
}

}  // namespace ferry::io
