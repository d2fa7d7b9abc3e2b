// Fuzz target: a SentencePiece tokenizer.model, through Ferry's own protobuf reader (GGUF export)
// and through the Tokenizer that training loads (the sentencepiece library), then a few encodes.
#include <cstdint>
#include <string>

#include "src/io/sentencepiece_model.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = ferry_fuzz::as_text(data, size);
  ferry_fuzz::expect_clean([&] { (void)ferry::io::parse_sentencepiece_model(bytes, "tokenizer.model"); });
  const std::string path = ferry_fuzz::write_scratch("tokenizer.model", bytes);
  ferry_fuzz::expect_clean([&] {
    const ferry::Tokenizer tokenizer(path);
    for (const char* text : {"", "hello world", "<s>12 + 7 = 19</s>", "\xff\xfe invalid"}) {
      (void)tokenizer.decode(tokenizer.encode(text));
    }
  });
  return 0;
}
