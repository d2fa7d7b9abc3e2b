// The generation settings a chat model's answers need, from the model's config, its tokenizer and
// the chat template: EOS ids (the model's and the tokenizer's), the template's stop ids, its stop
// strings and end-of-assistant marker as stop strings, and the pad id. Without a template (raw text
// generation) only the EOS ids stop. `ferry generate`, `ferry
// eval` and the RL rollouts all stop answers the same way. The caller sets max_new_tokens and
// sampling; `tokenizer` must outlive the options (stop strings are decoded with it).
#pragma once

#include "core/config/model_shape.h"
#include "src/generate/generate.h"

namespace ferry {

struct ChatTemplate;
class Tokenizer;

GenerateOptions chat_generate_options(const ModelShape& config, const Tokenizer& tokenizer,
                                      const ChatTemplate* chat_template);

}  // namespace ferry
