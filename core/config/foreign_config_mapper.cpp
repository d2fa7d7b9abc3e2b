// The key bookkeeping and the YAML writer of `ferry config import` (see foreign_config_mapper.h).
#include "core/config/foreign_config_mapper.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "core/config/config_io.h"
#include "core/error.h"
#include "core/text.h"

namespace ferry {
namespace {

bool parse_double(const std::string& text, double& out) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, out);
  return ec == std::errc() && ptr == end && std::isfinite(out);
}

// One YAML scalar or flow collection as a single line.
std::string flow_yaml(const YAML::Node& node) {
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

// `text` cut into lines of at most `width` characters at spaces.
std::vector<std::string> wrap(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::istringstream words(text);
  std::string word, line;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

}  // namespace

std::string number_text(double value) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  std::string s(buf, ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 3 -> 3.0: a float stays a float
  return s;
}

std::string yaml_scalar(const std::string& value) { return flow_yaml(YAML::Node(value)); }

ForeignConfigMapper::ForeignConfigMapper(const YAML::Node& root, std::string file, std::string tool,
                                         const std::set<std::string>& nested)
    : file_(std::move(file)), tool_(std::move(tool)) {
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    if (nested.count(key) > 0 && entry.second.IsMap()) {
      for (const auto& inner : entry.second) keys_.emplace_back(key + "." + inner.first.Scalar(), inner.second);
    } else {
      keys_.emplace_back(key, entry.second);
    }
  }
}

const YAML::Node* ForeignConfigMapper::lookup(const std::string& key) const {
  for (const auto& [name, value] : keys_) {
    if (name == key) return &value;
  }
  return nullptr;
}

bool ForeignConfigMapper::has(const std::string& key) const {
  const YAML::Node* n = lookup(key);
  return n != nullptr && !n->IsNull();
}

std::string ForeignConfigMapper::where(const std::string& key) const {
  const YAML::Node* n = lookup(key);
  if (n != nullptr && n->Mark().line >= 0) return file_ + ":" + std::to_string(n->Mark().line + 1);
  return file_;
}

const YAML::Node* ForeignConfigMapper::node(const std::string& key) {
  used_.insert(key);
  const YAML::Node* n = lookup(key);
  return n != nullptr && !n->IsNull() ? n : nullptr;
}

std::optional<std::string> ForeignConfigMapper::text(const std::string& key) {
  const YAML::Node* n = node(key);
  if (n == nullptr) return std::nullopt;
  if (!n->IsScalar()) throw ConfigError(where(key) + ": " + key + ": expected a string, got a " +
                                        (n->IsSequence() ? "list" : "mapping"));
  return n->Scalar();
}

std::optional<double> ForeignConfigMapper::number(const std::string& key) {
  const std::optional<std::string> s = text(key);
  if (!s) return std::nullopt;
  double value = 0;
  if (!parse_double(*s, value)) throw ConfigError(where(key) + ": " + key + ": expected a number, got '" + *s + "'");
  return value;
}

std::optional<int64_t> ForeignConfigMapper::integer(const std::string& key) {
  const std::optional<double> value = number(key);
  if (!value) return std::nullopt;
  if (*value != std::floor(*value) || std::fabs(*value) > 9.0e15) {
    throw ConfigError(where(key) + ": " + key + ": expected a whole number, got " + number_text(*value));
  }
  return static_cast<int64_t>(*value);
}

std::optional<bool> ForeignConfigMapper::flag(const std::string& key) {
  const std::optional<std::string> s = text(key);
  if (!s) return std::nullopt;
  for (const char* yes : {"true", "True", "TRUE", "yes", "Yes", "on", "On"}) {
    if (*s == yes) return true;
  }
  for (const char* no : {"false", "False", "FALSE", "no", "No", "off", "Off"}) {
    if (*s == no) return false;
  }
  throw ConfigError(where(key) + ": " + key + ": expected true or false, got '" + *s + "'");
}

std::optional<std::vector<std::string>> ForeignConfigMapper::names(const std::string& key) {
  const YAML::Node* n = node(key);
  if (n == nullptr) return std::nullopt;
  std::vector<std::string> out;
  if (n->IsSequence()) {
    for (const auto& item : *n) {
      if (!item.IsScalar()) throw ConfigError(where(key) + ": " + key + ": expected a list of names");
      out.push_back(trim(item.Scalar()));
    }
  } else if (n->IsScalar()) {
    std::istringstream parts(n->Scalar());
    std::string part;
    while (std::getline(parts, part, ',')) {
      if (!trim(part).empty()) out.push_back(trim(part));
    }
  } else {
    throw ConfigError(where(key) + ": " + key + ": expected a name or a list of names, got a mapping");
  }
  return out;
}

void ForeignConfigMapper::consume(const std::string& key) { used_.insert(key); }

void ForeignConfigMapper::unmapped(const std::string& key, const std::string& reason) {
  used_.insert(key);
  if (!has(key)) return;
  for (const auto& u : unmapped_) {
    if (u.key == key) return;
  }
  unmapped_.push_back({key, reason});
}

void ForeignConfigMapper::unmapped_part(const std::string& label, const std::string& reason) {
  unmapped_.push_back({label, reason});
}

std::optional<std::string> ForeignConfigMapper::peek(const std::string& key) const {
  const YAML::Node* n = lookup(key);
  if (n == nullptr || !n->IsScalar()) return std::nullopt;
  return n->Scalar();
}

void ForeignConfigMapper::unmapped_unless(const std::string& key, const std::string& harmless,
                                          const std::string& reason) {
  used_.insert(key);
  const YAML::Node* n = lookup(key);
  if (n == nullptr || n->IsNull()) return;
  if (n->IsScalar()) {
    double a = 0, b = 0;
    if (parse_double(n->Scalar(), a) && parse_double(harmless, b) && a == b) return;
    std::string value = n->Scalar();
    std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
    if (value == harmless) return;
  }
  unmapped(key, reason);
}

void ForeignConfigMapper::put(const std::string& ferry_key, std::string value, const std::string& comment) {
  Entry& e = entries_[ferry_key];
  e.value = std::move(value);
  if (!comment.empty()) e.comments = {comment};
}

void ForeignConfigMapper::set(const std::string& k, int64_t v, const std::string& c) { put(k, std::to_string(v), c); }
void ForeignConfigMapper::set(const std::string& k, double v, const std::string& c) { put(k, number_text(v), c); }
void ForeignConfigMapper::set(const std::string& k, bool v, const std::string& c) { put(k, v ? "true" : "false", c); }
void ForeignConfigMapper::set(const std::string& k, const std::string& v, const std::string& c) {
  put(k, flow_yaml(YAML::Node(v)), c);
}
void ForeignConfigMapper::set(const std::string& k, const char* v, const std::string& c) { set(k, std::string(v), c); }
void ForeignConfigMapper::set(const std::string& k, const std::vector<std::string>& v, const std::string& c) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& item : v) list.push_back(item);
  put(k, flow_yaml(list), c);
}
void ForeignConfigMapper::set(const std::string& k, const std::vector<double>& v, const std::string& c) {
  std::string text = "[";
  for (size_t i = 0; i < v.size(); ++i) text += (i > 0 ? ", " : "") + number_text(v[i]);
  put(k, text + "]", c);
}
void ForeignConfigMapper::set_yaml(const std::string& k, const std::string& yaml, const std::string& c) {
  put(k, yaml, c);
}

void ForeignConfigMapper::comment(const std::string& ferry_key, const std::string& comment) {
  entries_[ferry_key].comments.push_back(comment);
}

bool ForeignConfigMapper::is_set(const std::string& ferry_key) const {
  const auto it = entries_.find(ferry_key);
  return it != entries_.end() && !it->second.value.empty();
}

void ForeignConfigMapper::note(const std::string& line) { notes_.push_back(line); }

ImportedConfig ForeignConfigMapper::finish(Stage stage, std::string (*reason_for)(const std::string& key)) {
  for (const auto& [key, value] : keys_) {
    if (used_.count(key) == 0 && !value.IsNull()) unmapped_.push_back({key, reason_for(key)});
  }
  // File order: a part ("datasets[1]", "datasets[0].type") sits at its key.
  auto position = [&](const std::string& label) {
    for (size_t i = 0; i < keys_.size(); ++i) {
      const std::string& key = keys_[i].first;
      if (label == key || (label.rfind(key, 0) == 0 && (label[key.size()] == '[' || label[key.size()] == '.'))) {
        return i;
      }
    }
    return keys_.size();
  };
  std::stable_sort(unmapped_.begin(), unmapped_.end(),
                   [&](const UnmappedKey& a, const UnmappedKey& b) { return position(a.key) < position(b.key); });
  std::ostringstream out;
  for (const auto& line : notes_) {
    for (const auto& piece : wrap(line, 98)) out << "# " << piece << "\n";
  }
  const std::vector<std::string> order = config_key_paths();
  std::vector<std::pair<size_t, std::string>> keys;
  for (const auto& [key, entry] : entries_) {
    const auto at = std::find(order.begin(), order.end(), key);
    FERRY_CHECK(at != order.end(), "config import writes '", key, "', which is not a Ferry config key");
    FERRY_CHECK(!entry.value.empty(), "config import commented '", key, "' without setting it");
    keys.emplace_back(static_cast<size_t>(at - order.begin()), key);
  }
  std::sort(keys.begin(), keys.end());
  std::string section;
  for (const auto& [index, key] : keys) {
    const Entry& entry = entries_.at(key);
    const size_t dot = key.find('.');
    const std::string this_section = dot == std::string::npos ? "" : key.substr(0, dot);
    const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
    if (this_section != section) {
      section = this_section;
      if (!section.empty()) out << section << ":\n";
    }
    const std::string indent = section.empty() ? "" : "  ";
    for (const auto& c : entry.comments) {
      for (const auto& piece : wrap(c, 98 - indent.size())) out << indent << "# " << piece << "\n";
    }
    out << indent << name << ": " << entry.value << "\n";
  }
  return ImportedConfig{stage, out.str(), unmapped_};
}

}  // namespace ferry
