// ggml's tensor types as GGUF files store them: the enum values of ggml.h's `enum ggml_type`, and
// each type's block (elements per block, bytes per block). Quantised types store a row as whole
// blocks, so a row's length must be a multiple of the block's elements.
//
//   type    elements  bytes   layout of one block
//   F32        1        4     float
//   F16        1        2     IEEE half
//   BF16       1        2     bfloat16
//   Q4_0      32       18     half d; 16 bytes of 4-bit q (x = d * (q - 8))
//   Q4_1      32       20     half d, m; 16 bytes of 4-bit q (x = d * q + m)
//   Q5_0      32       22     half d; u32 high bits; 16 bytes of low nibbles (x = d * (q - 16))
//   Q5_1      32       24     half d, m; u32 high bits; 16 bytes of low nibbles (x = d * q + m)
//   Q8_0      32       34     half d; 32 x int8 (x = d * q)
//   Q2_K     256       84     16 bytes scales/mins, 64 bytes 2-bit q, half d, dmin
//   Q3_K     256      110     32 bytes high-bit mask, 64 bytes 2-bit q, 12 bytes scales, half d
//   Q4_K     256      144     half d, dmin, 12 bytes 6-bit scales/mins, 128 bytes 4-bit q
//   Q5_K     256      176     half d, dmin, 12 bytes scales/mins, 32 bytes high bits, 128 bytes q
//   Q6_K     256      210     128 bytes low 4 bits, 64 bytes high 2 bits, 16 x int8 scales, half d
#pragma once

#include <cstdint>
#include <string>

namespace ferry::io {

enum class GgmlType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, bf16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;        // as gguf-py and llama.cpp print it: "Q4_K"
  int64_t block_elements;  // elements per block (1 for F32/F16/BF16)
  int64_t block_bytes;     // bytes per block
};

// The traits of the ggml type numbered `value`, or nullptr when Ferry does not know that type
// (IQ*, TQ*, Q8_K, ... and numbers ggml never used).
const GgmlTypeTraits* find_ggml_type(uint32_t value);
const GgmlTypeTraits& ggml_type_traits(GgmlType type);

// "Q4_K"; for an unknown number "type 23" (so messages can always name it).
std::string ggml_type_name(GgmlType type);
std::string ggml_type_name(uint32_t value);

// The names of every type Ferry reads, comma separated, for error messages.
std::string ggml_supported_type_names();

// Bytes of `elements` values in `type`; throws InternalError-style FERRY_CHECK when `elements` is
// not a whole number of blocks (readers check rows first and report an InputError).
uint64_t ggml_nbytes(GgmlType type, int64_t elements);

// Bits per weight as stored (Q4_1: 5.0), for plans and messages.
double ggml_bits_per_weight(GgmlType type);

inline constexpr int64_t kQ8_0BlockSize = 32;   // elements per Q8_0 block
inline constexpr int64_t kQ8_0BlockBytes = 34;  // fp16 scale + 32 x int8

}  // namespace ferry::io
