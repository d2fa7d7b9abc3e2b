// PostProcessor: TemplateProcessing's leading special id and ByteLevel's offset trimming.
#include "src/tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "src/tokenizer/tokenizer_json.h"
#include "src/tokenizer/utf8.h"

namespace ferry {

PostProcessor PostProcessor::from_json(const nlohmann::json& post_processor, const JsonField& field) {
  PostProcessor out;
  if (!post_processor.is_null()) parse(post_processor, field, out);
  return out;
}

void PostProcessor::parse(const nlohmann::json& j, const JsonField& field, PostProcessor& out) {
  const std::string type = json_type(j, field);
  if (type == "Sequence") {
    const auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) field.at("processors").fail("must be a list of post-processors");
    for (size_t i = 0; i < it->size(); ++i) parse((*it)[i], field.at("processors").at(i), out);
  } else if (type == "ByteLevel") {
    if (json_bool(j, "trim_offsets", true, field)) out.trims_.push_back(json_bool(j, "add_prefix_space", true, field));
  } else if (type == "TemplateProcessing") {
    const auto single = j.find("single");
    if (single == j.end() || !single->is_array()) field.at("single").fail("must be a list of template pieces");
    if (single->empty() || !(*single)[0].contains("SpecialToken")) return;
    const nlohmann::json& first = (*single)[0]["SpecialToken"];
    const std::string name = json_string(first, "id", "", field.at("single").at(0).at("SpecialToken"));
    const auto specials = j.find("special_tokens");
    if (specials == j.end() || !specials->is_object() || !specials->contains(name)) {
      field.at("special_tokens").fail("has no entry for '" + name + "', which single[0] names");
    }
    const nlohmann::json& ids = (*specials)[name]["ids"];
    if (!ids.is_array() || ids.empty() || !ids[0].is_number_integer()) {
      field.at("special_tokens").at(name).at("ids").fail("must list the token's id");
    }
    out.leading_special_id_ = ids[0].get<int64_t>();
  } else {
    field.at("type").unsupported(type, {"ByteLevel", "TemplateProcessing", "Sequence"});
  }
}

void PostProcessor::trim_offsets(std::string_view text, std::vector<TokenSpan>& spans,
                                 const std::vector<uint32_t>& leading, const std::vector<uint32_t>& trailing) const {
  for (const bool add_prefix_space : trims_) {
    for (size_t i = 0; i < spans.size(); ++i) {
      TokenSpan& span = spans[i];
      uint32_t lead = leading[i];
      const uint32_t trail = trailing[i];
      if (lead > 0) {
        // A first token's one leading space is the one add_prefix_space put there: keep it.
        if ((i == 0 || span.begin == 0) && add_prefix_space && lead == 1) lead = 0;
        size_t begin = span.begin;
        for (uint32_t k = 0; k < lead && begin < span.end; ++k) {
          begin += utf8::char_length(static_cast<unsigned char>(text[begin]));
        }
        span.begin = std::min(begin, span.end);
      }
      if (trail > 0) {
        // Only when at least `trail` characters precede the end.
        size_t end = span.end;
        uint32_t k = 0;
        for (; k < trail && end > 0; ++k) {
          size_t length = 0;
          utf8::decode_before(text, end, &length);
          end -= length;
        }
        if (k == trail) span.end = std::max(end, span.begin);
      }
    }
  }
}

}  // namespace ferry
