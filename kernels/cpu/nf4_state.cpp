// bitsandbytes' serialised quant state: JSON in, JSON out (Python's json.dumps formatting).
#include "kernels/cpu/nf4_state.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace ferry::kernels {
namespace {

template <class... Args>
[[noreturn]] void bad_state(const std::string& what, const Args&... args) {
  throw InputError(detail::concat(what, ": bitsandbytes quant state: ", args...));
}

Nf4ValueType parse_dtype(const std::string& name, const std::string& what) {
  if (name == "float32") return Nf4ValueType::f32;
  if (name == "bfloat16") return Nf4ValueType::bf16;
  if (name == "float16") return Nf4ValueType::f16;
  bad_state(what, "dtype \"", name, "\" (expected float32, bfloat16 or float16)");
}

// Python's repr(float) (what json.dumps writes): the shortest digits that read back to the same
// double, fixed notation for decimal exponents -4..15 (with at least one digit after the point),
// else d.ddde[+-]XX.
std::string python_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string text(buf, result.ptr);
  const size_t e_at = text.find('e');
  const bool negative = text[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e_at; ++i) {
    if (text[i] != '.') digits += text[i];
  }
  const int exponent = std::atoi(text.c_str() + e_at + 1);
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const size_t integer_digits = size_t(exponent) + 1;
      if (digits.size() <= integer_digits) {
        out += digits + std::string(integer_digits - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
      }
    } else {
      out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int magnitude = std::abs(exponent);
  out += exponent < 0 ? "e-" : "e+";
  if (magnitude < 10) out += "0";
  out += std::to_string(magnitude);
  return out;
}

}  // namespace

int64_t Nf4QuantState::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const char* nf4_dtype_name(Nf4ValueType type) {
  switch (type) {
    case Nf4ValueType::f32: return "float32";
    case Nf4ValueType::bf16: return "bfloat16";
    case Nf4ValueType::f16: return "float16";
  }
  return "float32";
}

Nf4QuantState nf4_parse_quant_state(std::string_view json, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    bad_state(what, "not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) bad_state(what, "expected a JSON object");
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) bad_state(what, "no \"", key, "\"");
    return j.at(key);
  };
  Nf4QuantState state;
  const auto& quant_type = need("quant_type");
  if (!quant_type.is_string() || quant_type.get<std::string>() != "nf4") {
    bad_state(what, "quant_type ", quant_type.dump(), " (only \"nf4\" is supported, not fp4)");
  }
  const auto& blocksize = need("blocksize");
  if (!blocksize.is_number_integer() || !nf4_valid_blocksize(blocksize.get<int64_t>())) {
    bad_state(what, "blocksize ", blocksize.dump(), " (expected 32, 64, ..., 4096)");
  }
  state.blocksize = blocksize.get<int64_t>();
  const auto& dtype = need("dtype");
  if (!dtype.is_string()) bad_state(what, "dtype ", dtype.dump());
  state.dtype = parse_dtype(dtype.get<std::string>(), what);
  const auto& shape = need("shape");
  if (!shape.is_array()) bad_state(what, "shape ", shape.dump(), " (expected a list of sizes)");
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) bad_state(what, "shape ", shape.dump());
    state.shape.push_back(d.get<int64_t>());
  }
  state.nested = j.contains("nested_offset") || j.contains("nested_blocksize");
  if (state.nested) {
    const auto& offset = need("nested_offset");
    if (!offset.is_number()) bad_state(what, "nested_offset ", offset.dump());
    state.nested_offset = float(offset.get<double>());
    const auto& nested_blocksize = need("nested_blocksize");
    if (!nested_blocksize.is_number_integer() || nested_blocksize.get<int64_t>() <= 0) {
      bad_state(what, "nested_blocksize ", nested_blocksize.dump());
    }
    state.nested_blocksize = nested_blocksize.get<int64_t>();
    if (j.contains("nested_dtype") && j.at("nested_dtype") != "float32") {
      bad_state(what, "nested_dtype ", j.at("nested_dtype").dump(), " (expected \"float32\")");
    }
  }
  return state;
}

std::string nf4_quant_state_json(const Nf4QuantState& state) {
  std::string shape;
  for (size_t i = 0; i < state.shape.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(state.shape[i]);
  }
  std::string out = detail::concat("{\"quant_type\": \"nf4\", \"blocksize\": ", state.blocksize,
                                   ", \"dtype\": \"", nf4_dtype_name(state.dtype), "\", \"shape\": [",
                                   shape, "]");
  if (state.nested) {
    out += detail::concat(", \"nested_blocksize\": ", state.nested_blocksize,
                          ", \"nested_dtype\": \"float32\", \"nested_offset\": ",
                          python_float(double(state.nested_offset)));
  }
  return out + "}";
}

}  // namespace ferry::kernels
