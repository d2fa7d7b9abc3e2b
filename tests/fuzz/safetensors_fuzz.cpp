// Fuzz target: a .safetensors file (header and body): opened, every tensor's info read and every
// tensor loaded.
#include <cstdint>

#include "src/io/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ferry_fuzz::write_scratch("model.safetensors", ferry_fuzz::as_text(data, size));
  ferry_fuzz::expect_clean([&] {
    const ferry::io::SafetensorsFile file(path);
    for (const std::string& name : file.names()) (void)file.info(name);
    (void)file.load_all();
  });
  return 0;
}
