// PreTokenizer: Split and ByteLevel steps over normalized text.
#include "src/tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include <algorithm>

#include "src/tokenizer/onig_regex.h"
#include "src/tokenizer/tokenizer_json.h"
#include "src/tokenizer/utf8.h"

namespace ferry {
namespace {

// ByteLevel's own pattern (use_regex: true), GPT-2's.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Rust's char::is_numeric: general categories Nd, Nl, No.
bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL || category == UTF8PROC_CATEGORY_NO;
}

}  // namespace

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::from_json(const nlohmann::json& pre_tokenizer, const JsonField& field) {
  PreTokenizer out;
  if (pre_tokenizer.is_null()) {
    field.fail("is null; byte-level BPE needs a ByteLevel pre-tokenizer (alone or last in a Sequence)");
  }
  parse(pre_tokenizer, field, out, true);
  if (!out.byte_level_) {
    field.fail("has no ByteLevel step; Ferry reads byte-level BPE tokenizers (Qwen2, Llama 3, GPT-2 style), "
               "whose pre_tokenizer ends with ByteLevel");
  }
  return out;
}

void PreTokenizer::parse(const nlohmann::json& j, const JsonField& field, PreTokenizer& out, bool last) {
  const std::string type = json_type(j, field);
  if (out.byte_level_) field.fail("comes after the ByteLevel step; ByteLevel must be the last pre-tokenizer");
  if (type == "Sequence") {
    const auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) field.at("pretokenizers").fail("must be a list of pre-tokenizers");
    for (size_t i = 0; i < it->size(); ++i) {
      parse((*it)[i], field.at("pretokenizers").at(i), out, last && i + 1 == it->size());
    }
  } else if (type == "Split") {
    SplitStep step;
    const auto pattern = j.find("pattern");
    if (pattern == j.end() || !pattern->is_object() || pattern->size() != 1) {
      field.at("pattern").fail("must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    }
    const std::string kind = pattern->begin().key();
    if (!pattern->begin()->is_string()) field.at("pattern").at(kind).fail("must be a string");
    const std::string value = pattern->begin()->get<std::string>();
    if (kind == "Regex") {
      step.regex = std::make_unique<OnigurumaRegex>(value, field.file + ": " + field.at("pattern.Regex").path);
    } else if (kind == "String") {
      if (value.empty()) field.at("pattern.String").fail("must not be empty");
      step.literal = value;
    } else {
      field.at("pattern").unsupported(kind, {"Regex", "String"});
    }
    const std::string behavior = json_string(j, "behavior", "", field);
    if (behavior == "Removed") {
      step.behavior = Behavior::removed;
    } else if (behavior == "Isolated") {
      step.behavior = Behavior::isolated;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = Behavior::merged_with_previous;
    } else if (behavior == "MergedWithNext") {
      step.behavior = Behavior::merged_with_next;
    } else if (behavior == "Contiguous") {
      step.behavior = Behavior::contiguous;
    } else {
      field.at("behavior").unsupported(behavior,
                                       {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"});
    }
    step.invert = json_bool(j, "invert", false, field);
    out.steps_.push_back(std::move(step));
  } else if (type == "Digits") {
    // Rust's Digits: numeric characters split off one by one (individual_digits) or in runs.
    SplitStep step;
    step.digits = true;
    step.behavior = json_bool(j, "individual_digits", false, field) ? Behavior::isolated : Behavior::contiguous;
    out.steps_.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    if (!last) field.fail("is a ByteLevel step before other pre-tokenizers; ByteLevel must be the last one");
    out.byte_level_ = true;
    out.add_prefix_space_ = json_bool(j, "add_prefix_space", true, field);
    if (json_bool(j, "use_regex", true, field)) {
      out.byte_level_regex_ = std::make_unique<SplitStep>();
      out.byte_level_regex_->regex = std::make_unique<OnigurumaRegex>(kGpt2Pattern, "ByteLevel pattern");
    }
  } else {
    field.at("type").unsupported(type, {"Sequence", "Split", "Digits", "ByteLevel"});
  }
}

void PreTokenizer::apply(const SplitStep& step, std::string_view text, size_t begin, size_t end,
                         std::vector<std::pair<size_t, size_t>>& out) {
  // Pattern::find_matches: the piece cut into matches and the text between them, in order.
  thread_local std::vector<std::pair<size_t, size_t>> found;
  thread_local std::vector<std::pair<std::pair<size_t, size_t>, bool>> parts;
  found.clear();
  parts.clear();
  const std::string_view piece = text.substr(begin, end - begin);
  if (step.regex) {
    step.regex->find_all(piece, found);
  } else if (step.digits) {
    for (size_t pos = 0, length = 0; pos < piece.size(); pos += length) {
      if (is_numeric(utf8::decode(piece, pos, &length))) found.emplace_back(pos, pos + length);
    }
  } else {
    for (size_t at = piece.find(step.literal); at != std::string_view::npos;
         at = piece.find(step.literal, at + step.literal.size())) {
      found.emplace_back(at, at + step.literal.size());
    }
  }
  size_t previous = 0;
  for (const auto& [b, e] : found) {
    if (previous != b) parts.push_back({{previous, b}, false});
    parts.push_back({{b, e}, true});
    previous = e;
  }
  if (previous != piece.size()) parts.push_back({{previous, piece.size()}, false});
  if (step.invert) {
    for (auto& part : parts) part.second = !part.second;
  }

  // NormalizedString::split: what each behavior keeps and merges.
  const size_t first = out.size();
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::isolated:
      for (const auto& part : parts) out.push_back(part.first);
      break;
    case Behavior::removed:
      for (const auto& part : parts) {
        if (!part.second) out.push_back(part.first);
      }
      break;
    case Behavior::contiguous:
      for (const auto& [range, is_match] : parts) {
        if (is_match == previous_match && out.size() > first) {
          out.back().second = range.second;
        } else {
          out.push_back(range);
        }
        previous_match = is_match;
      }
      break;
    case Behavior::merged_with_previous:
      for (const auto& [range, is_match] : parts) {
        if (is_match && !previous_match && out.size() > first) {
          out.back().second = range.second;
        } else {
          out.push_back(range);
        }
        previous_match = is_match;
      }
      break;
    case Behavior::merged_with_next:
      // Right to left: a match joins the piece after it.
      for (size_t i = parts.size(); i-- > 0;) {
        const auto& [range, is_match] = parts[i];
        if (is_match && !previous_match && out.size() > first) {
          out.back().first = range.first;
        } else {
          out.push_back(range);
        }
        previous_match = is_match;
      }
      std::reverse(out.begin() + static_cast<long>(first), out.end());
      break;
  }
  for (size_t i = first; i < out.size(); ++i) {
    out[i].first += begin;
    out[i].second += begin;
  }
}

void PreTokenizer::split(std::string_view text, std::vector<PreToken>& out) const {
  if (text.empty()) return;
  thread_local std::vector<std::pair<size_t, size_t>> ranges;
  thread_local std::vector<std::pair<size_t, size_t>> next;
  ranges.assign(1, {0, text.size()});
  for (const SplitStep& step : steps_) {
    next.clear();
    for (const auto& [b, e] : ranges) {
      if (b < e) apply(step, text, b, e, next);
    }
    ranges.swap(next);
  }
  thread_local std::string prefixed;
  thread_local std::vector<std::pair<size_t, size_t>> words;
  for (const auto& [b, e] : ranges) {
    if (b >= e) continue;
    const bool prefix = add_prefix_space_ && text[b] != ' ';
    if (!byte_level_regex_) {
      out.push_back({b, e, prefix});
      continue;
    }
    // GPT-2's pattern runs on the word with its prefix space, as in the Rust library.
    std::string_view word = text.substr(b, e - b);
    if (prefix) {
      prefixed.assign(1, ' ');
      prefixed.append(word);
      word = prefixed;
    }
    words.clear();
    apply(*byte_level_regex_, word, 0, word.size(), words);
    const size_t shift = prefix ? 1 : 0;
    for (const auto& [wb, we] : words) {
      if (wb >= we) continue;
      if (prefix && wb == 0) {
        out.push_back({b, b + we - shift, true});
      } else {
        out.push_back({b + wb - shift, b + we - shift, false});
      }
    }
  }
}

}  // namespace ferry
