// The clock the Jinja renderer's tests render with: strftime_now() at 2024-07-26 10:30:00, the
// time tests/parity/jinja_templates_ref.py pins transformers' strftime_now() to. Header-only.
#pragma once

#include <ctime>

#include "src/tokenizer/jinja/template.h"

namespace ferry::test_support {

inline ferry::jinja::RenderOptions pinned_clock() {
  ferry::jinja::RenderOptions options;
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 10;
  tm.tm_min = 30;
  options.now = tm;
  return options;
}

}  // namespace ferry::test_support
