// Fuzz target: a YAML/JSON stage config, with `--set` overrides. Lines of the input that start
// with "#set " are also applied as overrides (`#set a.b=c`), then the result is validated and
// written back as YAML, as `ferry config show` does.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/config_io.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(ferry_fuzz::as_text(data, size));
  ferry_fuzz::expect_clean([&] {
    ferry::Config config = ferry::parse_config(text, "fuzz.yaml");
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("#set ", 0) == 0) ferry::apply_override(config, line.substr(5));
    }
    ferry::validate_config(config);
    (void)ferry::config_to_yaml(config);
  });
  return 0;
}
