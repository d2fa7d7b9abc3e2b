// Fuzz target: a .gguf model file: opened and validated (header, metadata, tensor table, data
// offsets), read as a Hugging Face model (config, every tensor converted) and its vocabulary
// written as tokenizer files.
#include <cstdint>

#include "src/io/gguf_file.h"
#include "src/io/gguf_model.h"
#include "src/io/gguf_tokenizer_files.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ferry_fuzz::write_scratch("model.gguf", ferry_fuzz::as_text(data, size));
  ferry_fuzz::expect_clean([&] {
    const ferry::io::GgufFile file = ferry::io::GgufFile::open(path);
    const ferry::io::GgufWeights weights(file);
    for (const std::string& name : weights.names()) (void)weights.load(name);
    ferry::io::write_gguf_tokenizer_files(file, ferry_fuzz::scratch_dir());
  });
  return 0;
}
