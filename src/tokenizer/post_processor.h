// PostProcessor: what Ferry takes from the tokenizer.json `post_processor` (null, ByteLevel,
// TemplateProcessing, or a Sequence of them). Ferry's encode never adds BOS/EOS, so the
// template only tells which special token a single sequence would start with (Llama 3's
// <|begin_of_text|>); ByteLevel with trim_offsets moves token offsets off the spaces a token
// starts or ends with, which the Rust library does even when no special tokens are added.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "src/tokenizer/token_span.h"

namespace ferry {

struct JsonField;

class PostProcessor {
 public:
  static PostProcessor from_json(const nlohmann::json& post_processor, const JsonField& field);

  // The special token TemplateProcessing puts first in a single sequence, if any.
  std::optional<int64_t> leading_special_id() const { return leading_special_id_; }

  bool trims_offsets() const { return !trims_.empty(); }

  // ByteLevel's process_offsets on `spans` of `text`: `leading[i]` / `trailing[i]` count the
  // spaces ("Ġ" or Unicode White_Space characters) token i's piece starts / ends with. Offsets
  // move by whole characters of `text`, as the library's character offsets do.
  void trim_offsets(std::string_view text, std::vector<TokenSpan>& spans, const std::vector<uint32_t>& leading,
                    const std::vector<uint32_t>& trailing) const;

 private:
  static void parse(const nlohmann::json& j, const JsonField& field, PostProcessor& out);

  std::optional<int64_t> leading_special_id_;
  std::vector<bool> trims_;  // one per ByteLevel step with trim_offsets: its add_prefix_space
};

}  // namespace ferry
