// Fuzz target: the JSON Lines readers of every data format — SFT conversations, preference pairs
// and RL prompts — strict and with skip_bad_lines, with the demo tokenizer and template.
#include <cstdint>
#include <sstream>
#include <string>

#include "src/data/preference_dataset.h"
#include "src/data/sft_dataset.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/rl/prompt_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ferry::Tokenizer tokenizer(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model");
  static const ferry::ChatTemplate chat = ferry::load_chat_template("demo");
  const std::string path = ferry_fuzz::write_scratch("data.jsonl", ferry_fuzz::as_text(data, size));
  for (bool skip : {false, true}) {
    ferry_fuzz::expect_clean([&] { (void)ferry::load_sft_dataset(path, tokenizer, chat, 64, skip); });
    ferry_fuzz::expect_clean([&] { (void)ferry::load_preference_dataset(path, tokenizer, chat, 64, skip); });
    ferry_fuzz::expect_clean([&] {
      std::ostringstream log;
      (void)ferry::rl::PromptFile(path, tokenizer, chat, {.max_length = 64, .skip_bad_lines = skip}, log).load_all();
    });
  }
  return 0;
}
