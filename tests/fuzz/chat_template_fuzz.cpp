// Fuzz target: chat-template rendering of hostile message lists. The input is a JSON object with
// "messages" (as a data line has); each shipped template renders it as a training sample and as a
// prompt, with the demo tokenizer (a template whose markers that tokenizer lacks must say so).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "src/data/conversation_json.h"
#include "src/tokenizer/chat_message.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ferry::Tokenizer tokenizer(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model");
  static const std::vector<ferry::ChatTemplate> templates = [] {
    std::vector<ferry::ChatTemplate> all;
    for (const char* name : {"demo", "llama2", "chatml", "llama3", "qwen2.5", "mistral"}) {
      all.push_back(ferry::load_chat_template(name));
    }
    return all;
  }();
  const nlohmann::ordered_json object = nlohmann::ordered_json::parse(ferry_fuzz::as_text(data, size), nullptr, false);
  if (object.is_discarded() || !object.is_object()) return 0;  // the JSON parser is not the target
  ferry_fuzz::expect_clean([&] {
    const ferry::Conversation conversation = ferry::conversation_from_json(object, "messages");
    for (const ferry::ChatTemplate& chat : templates) {
      ferry_fuzz::expect_clean([&] {
        ferry::check_conversation(conversation, ferry::ConversationEnd::assistant);
        (void)chat.apply(conversation, tokenizer);
      });
      ferry_fuzz::expect_clean([&] {
        ferry::check_conversation(conversation, ferry::ConversationEnd::user);
        (void)chat.render_prompt(conversation, tokenizer);
      });
    }
  });
  return 0;
}
