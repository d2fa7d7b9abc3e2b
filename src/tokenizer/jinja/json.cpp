// JSON in and out of the renderer (see json.h).
#include "src/tokenizer/jinja/json.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/operators.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {
namespace {

Value from_json_at(const nlohmann::ordered_json& json, uint32_t depth) {
  if (depth > kMaxValueDepth) throw Failure("JSON nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw Failure("integer " + std::to_string(u) + " is beyond the renderer's 64-bit integers");
      }
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::floating(json.get<double>());
    // The render variables outlive the render: their strings are used in place.
    case nlohmann::ordered_json::value_t::string: return Value::borrowed_string(json.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_at(item, depth + 1));
      return Value::make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto dict = std::make_shared<DictData>();
      dict->reserve(json.size());
      for (const auto& [key, item] : json.get_ref<const nlohmann::ordered_json::object_t&>()) {
        dict->append_new(Value::borrowed_string(key), from_json_at(item, depth + 1));
      }
      return Value::make_dict(std::move(dict));
    }
    default: throw Failure("unsupported JSON value (binary data)");
  }
}

void append_unicode_escape(std::string& out, unsigned code) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", code);
  out += buf;
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t c = pystr::decode(s, pos);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      append_unicode_escape(out, static_cast<unsigned>(c));
    } else if (c < 0x80 || !ensure_ascii) {
      out.append(s.substr(start, pos - start));
    } else if (c < 0x10000) {
      append_unicode_escape(out, static_cast<unsigned>(c));
    } else {
      const char32_t v = c - 0x10000;
      append_unicode_escape(out, static_cast<unsigned>(0xD800 | (v >> 10)));
      append_unicode_escape(out, static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (d != d) return "NaN";
  if (d == std::numeric_limits<double>::infinity()) return "Infinity";
  if (d == -std::numeric_limits<double>::infinity()) return "-Infinity";
  return float_repr(d);
}

[[noreturn]] void not_serializable(const Value& v) {
  throw Failure("TypeError: Object of type " + type_name(v) + " is not JSON serializable");
}

class Dumper {
 public:
  explicit Dumper(const DumpOptions& options)
      : options_(options),
        item_sep_(options.item_separator.value_or(options.indent ? "," : ", ")),
        key_sep_(options.key_separator.value_or(": ")) {}

  void value(const Value& v, uint32_t level) {
    if (level > kMaxValueDepth) throw Failure("ValueError: Circular reference detected");
    switch (v.kind()) {
      case Kind::none: out += "null"; return;
      case Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
      case Kind::integer: out += int_str(v.as_int()); return;
      case Kind::floating: out += float_json(v.as_float()); return;
      case Kind::string: append_json_string(out, v.str(), options_.ensure_ascii); return;
      case Kind::list:
        if (v.list().flavor != ListFlavor::list && v.list().flavor != ListFlavor::tuple) not_serializable(v);
        array(v.list().items, level);
        return;
      case Kind::dict: object(v.dict(), level); return;
      default: not_serializable(v);
    }
  }

  std::string out;

 private:
  void newline(uint32_t level) {
    if (!options_.indent) return;
    out += '\n';
    for (uint32_t i = 0; i < level; ++i) out += *options_.indent;
  }

  void array(const std::vector<Value>& items, uint32_t level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep_;
      newline(level + 1);
      value(items[i], level + 1);
    }
    newline(level);
    out += ']';
  }

  std::string key_text(const Value& key) {
    switch (key.kind()) {
      case Kind::string: return key.str();
      case Kind::floating: return float_json(key.as_float());
      case Kind::boolean: return key.as_bool() ? "true" : "false";
      case Kind::integer: return int_str(key.as_int());
      case Kind::none: return "null";
      default: throw Failure("TypeError: keys must be str, int, float, bool or None, not " + type_name(key));
    }
  }

  void object(const DictData& dict, uint32_t level) {
    if (dict.size() == 0) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : dict.items()) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return less_than(a->first, b->first); });
    }
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += item_sep_;
      newline(level + 1);
      append_json_string(out, key_text(entries[i]->first), options_.ensure_ascii);
      out += key_sep_;
      value(entries[i]->second, level + 1);
    }
    newline(level);
    out += '}';
  }

  const DumpOptions& options_;
  std::string item_sep_, key_sep_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 0); }

std::string dumps(const Value& v, const DumpOptions& options) {
  Dumper dumper(options);
  dumper.value(v, 0);
  return std::move(dumper.out);
}

}  // namespace ferry::jinja
