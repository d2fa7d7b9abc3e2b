// config.json's `quantization_config`: how a Hugging Face folder's weights are stored when
// transformers saved a quantised model. Ferry reads bitsandbytes' 4-bit NF4 checkpoints
// (`save_pretrained` of a model loaded with BitsAndBytesConfig(load_in_4bit=True,
// bnb_4bit_quant_type="nf4")), the form many downloaded "-bnb-4bit" models have:
//   "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true,
//     "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true,
//     "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": "uint8",
//     "llm_int8_skip_modules": null, ...}
// The weights themselves (packed codes + quant-state tensors) are src/io/nf4_checkpoint.h's. Every
// other quantisation (fp4, 8-bit LLM.int8, GPTQ, AWQ, ...) is refused with an InputError that
// names config.json and the key; keys about 8-bit loading or CPU offload only are ignored.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::io {

struct HfQuantization {
  bool nf4 = false;           // bitsandbytes 4-bit NF4 (else: not quantised)
  bool double_quant = false;  // bnb_4bit_use_double_quant (each tensor's quant state decides; informational)
  std::string compute_dtype;  // bnb_4bit_compute_dtype as written ("" when absent); Ferry computes in
                              // train.precision (or generate's dtype) instead
  std::vector<std::string> skip_modules;  // llm_int8_skip_modules: module names transformers left in
                                          // full precision (the folder stores them so)
};

// The folder's quantisation from config.json text; `source` names the file in messages. No
// `quantization_config` (or null): not quantised. Throws InputError naming the file and the key for
// a method, quant type or storage Ferry cannot read, saying what to use instead.
HfQuantization parse_hf_quantization(std::string_view json_text, const std::string& source);
HfQuantization read_hf_quantization(const std::filesystem::path& config_json);

}  // namespace ferry::io
