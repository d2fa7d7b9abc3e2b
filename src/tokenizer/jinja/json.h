// JSON in and out: the render variables (nlohmann::ordered_json, key order kept) become template
// values, and `tojson` writes values back as transformers' tojson filter does, which is Python's
// json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

// Objects become dicts, arrays lists, numbers int or float; strings refer to `json`'s own, which
// must outlive the values (Value::borrowed_string). Throws Failure for an unsigned integer beyond
// int64 (Ferry's ints are 64-bit) or nesting deeper than kMaxValueDepth.
Value from_json(const nlohmann::ordered_json& json);

struct DumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::optional<std::string> item_separator, key_separator;  // Python's defaults when unset
  bool sort_keys = false;
};

// json.dumps; throws Failure("TypeError: Object of type X is not JSON serializable") as Python.
std::string dumps(const Value& v, const DumpOptions& options);

}  // namespace ferry::jinja
