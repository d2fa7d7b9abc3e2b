// Fuzz target: a Hugging Face config.json (both rope_scaling formats, every family's keys), as
// read for the model, for its head and for its quantization_config.
#include <cstdint>
#include <string>

#include "src/io/hf_config.h"
#include "src/io/hf_quantization.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = ferry_fuzz::as_text(data, size);
  ferry_fuzz::expect_clean([&] { (void)ferry::io::parse_hf_config(text, "config.json"); });
  ferry_fuzz::expect_clean([&] { (void)ferry::io::parse_hf_head(text, "config.json"); });
  ferry_fuzz::expect_clean([&] { (void)ferry::io::parse_hf_quantization(text, "config.json"); });
  return 0;
}
