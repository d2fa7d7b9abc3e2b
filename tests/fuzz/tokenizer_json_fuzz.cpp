// Fuzz target: a Hugging Face tokenizer.json (byte-level BPE: added tokens, normalizer,
// pre-tokenizer regexes, merges, post-processor, decoder), loaded from a model folder as training
// does, then a few encodes and decodes.
#include <cstdint>
#include <filesystem>
#include <string>

#include "src/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ferry_fuzz::write_scratch("tokenizer.json", ferry_fuzz::as_text(data, size));
  ferry_fuzz::expect_clean([&] {
    const ferry::Tokenizer tokenizer(std::filesystem::path(path).parent_path().string());
    for (const char* text : {"", "Hello, world!", "  x\n\n<|im_end|>  ", "日本語 🙂", "\xff\xfe invalid"}) {
      (void)tokenizer.decode(tokenizer.encode(text));
    }
  });
  return 0;
}
