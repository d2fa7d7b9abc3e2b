// Generation settings of chat answers (see chat_generate_options.h).
#include "src/generate/chat_generate_options.h"

#include "core/text.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {

GenerateOptions chat_generate_options(const ModelShape& config, const Tokenizer& tokenizer,
                                      const ChatTemplate* chat_template) {
  GenerateOptions options;
  options.eos_token_ids = config.eos_token_ids;
  if (tokenizer.eos_id() >= 0) options.eos_token_ids.push_back(tokenizer.eos_id());
  if (chat_template != nullptr) {
    options.stop_token_ids = chat_template->stop_token_ids(tokenizer);
    options.stop_strings = chat_template->stop_strings;
    if (const std::string marker = trim(chat_template->assistant_suffix); !marker.empty()) {
      options.stop_strings.push_back(marker);
    }
  }
  options.tokenizer = &tokenizer;
  options.pad_token_id = config.pad_token_id >= 0 ? config.pad_token_id : tokenizer.pad_id();
  return options;
}

}  // namespace ferry
