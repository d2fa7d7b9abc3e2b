// A model folder loaded for inference by the CLI (`ferry generate`, `ferry eval`): the model on the
// GPU in bf16 when one is visible, else in fp32 on the CPU, with the folder's tokenizer, and the
// generation settings both commands derive from them.
#pragma once

#include <string>

#include "src/generate/generate.h"
#include "src/model/model_heads.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
struct ChatTemplate;
}  // namespace ferry

namespace ferry::cli {

struct InferenceModel {
  CausalLM model;
  Tokenizer tokenizer;

  // EOS ids (the model's and the tokenizer's), the template's stop ids, its stop strings and
  // end-of-assistant marker as stop strings (decoded with this tokenizer, which must outlive the
  // options) and the pad id; the caller sets max_new_tokens and sampling. Null: raw text, EOS only.
  GenerateOptions generate_options(const ChatTemplate* chat_template) const;
};

// Throws InputError when the folder's tokenizer has more tokens than the model's vocabulary.
InferenceModel load_inference_model(const std::string& dir);

}  // namespace ferry::cli
