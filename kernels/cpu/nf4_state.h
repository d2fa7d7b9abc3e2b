// The quant state of one NF4 tensor as bitsandbytes serialises it (QuantState.as_dict(packed=True)),
// for loading checkpoints bnb saved (`save_pretrained` of a 4-bit model) and writing ones bnb loads.
// A 4-bit Linear's weight `W` is stored as these tensors next to each other:
//   W                                    uint8 (ceil(numel / 2), 1): the packed codes (nf4.h)
//   W.absmax                             fp32 (blocks), or uint8 (blocks) when nested
//   W.quant_map                          fp32 (16): the NF4 code book
//   W.nested_absmax                      fp32 (ceil(blocks / 256))        [nested only]
//   W.nested_quant_map                   fp32 (256): the dynamic code book [nested only]
//   W.quant_state.bitsandbytes__nf4      uint8: UTF-8 JSON of the rest, e.g.
//     {"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [96, 200],
//      "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.0361...}
// Torch-free: the caller reads the tensors (src/io/safetensors) and hands over the JSON bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/nf4.h"

namespace ferry::kernels {

// Suffixes (after "W.") of the tensors above.
inline constexpr const char* kNf4AbsmaxKey = "absmax";
inline constexpr const char* kNf4QuantMapKey = "quant_map";
inline constexpr const char* kNf4NestedAbsmaxKey = "nested_absmax";
inline constexpr const char* kNf4NestedQuantMapKey = "nested_quant_map";
inline constexpr const char* kNf4QuantStateKey = "quant_state.bitsandbytes__nf4";

struct Nf4QuantState {
  std::vector<int64_t> shape;              // of the full-precision tensor
  int64_t blocksize = kNf4DefaultBlocksize;
  Nf4ValueType dtype = Nf4ValueType::f32;  // of the full-precision tensor ("dtype")
  bool nested = false;                     // double-quantised absmax
  int64_t nested_blocksize = kNf4NestedBlocksize;
  float nested_offset = 0.0f;              // exact: the JSON holds the fp32 value as a double

  int64_t numel() const;
  int64_t blocks() const { return nf4_blocks(numel(), blocksize); }
  int64_t nested_blocks() const { return nf4_blocks(blocks(), nested_blocksize); }
  int64_t packed_bytes() const { return nf4_packed_bytes(numel()); }
};

// Parses the JSON of `W.quant_state.bitsandbytes__nf4`. `what` names the tensor in errors. Throws
// InputError for malformed JSON, quant_type other than "nf4" (fp4 is not supported), a blocksize
// bnb does not accept, a dtype other than float32/bfloat16/float16, a nested_dtype other than
// float32, a missing or negative shape, or a nested state without its offset.
Nf4QuantState nf4_parse_quant_state(std::string_view json, const std::string& what);

// The JSON bnb writes for `state` (json.dumps of as_dict's non-tensor items, same keys, order,
// separators and float formatting as Python), so the bytes equal bnb's for the same state.
std::string nf4_quant_state_json(const Nf4QuantState& state);

// "float32", "bfloat16", "float16" (bnb's `str(dtype).strip("torch.")`).
const char* nf4_dtype_name(Nf4ValueType type);

}  // namespace ferry::kernels
