// Loading, truncation and eval split of SFT conversations.
#include "src/data/sft_dataset.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "src/data/conversation_json.h"
#include "src/tokenizer/chat_template.h"

namespace ferry {

std::string SftDatasetStats::summary() const {
  std::string s = std::to_string(samples) + " samples (" + std::to_string(tokens) + " tokens, " +
                  std::to_string(loss_tokens) + " with loss), " + std::to_string(truncated) + " truncated (" +
                  std::to_string(rounds_dropped) + " rounds dropped), " + std::to_string(dropped_too_long) +
                  " dropped as too long";
  if (jsonl.skipped > 0) {
    s += ", " + std::to_string(jsonl.skipped) + " bad lines skipped (first: " + jsonl.first_skipped_error + ")";
  }
  return s;
}

SftDataset load_sft_dataset(const std::string& path, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                            int64_t max_length, bool skip_bad_lines, int64_t max_samples) {
  SftDataset dataset;
  auto& stats = dataset.stats;
  stats.jsonl = read_jsonl(path, skip_bad_lines, [&](int64_t line, const nlohmann::ordered_json& object) {
    if (max_samples > 0 && static_cast<int64_t>(dataset.samples.size()) >= max_samples) return;
    const Conversation conversation = conversation_from_json(object, "messages");
    TokenizedConversation tokenized = chat_template.apply(conversation, tokenizer, chat_context_from_json(object));
    // Keep the most whole rounds that fit.
    size_t rounds = 0;
    while (rounds < tokenized.round_ends.size() &&
           static_cast<int64_t>(tokenized.round_ends[rounds]) <= max_length) {
      ++rounds;
    }
    if (rounds == 0) {
      ++stats.dropped_too_long;
      return;
    }
    if (rounds < tokenized.round_ends.size()) {
      ++stats.truncated;
      stats.rounds_dropped += static_cast<int64_t>(tokenized.round_ends.size() - rounds);
      tokenized = tokenized.first_rounds(rounds);
    }
    TokenizedSample sample{std::move(tokenized.ids), std::move(tokenized.loss_mask), line};
    stats.tokens += static_cast<int64_t>(sample.ids.size());
    stats.loss_tokens += std::count(sample.loss_mask.begin(), sample.loss_mask.end(), uint8_t{1});
    dataset.samples.push_back(std::move(sample));
  });
  stats.samples = static_cast<int64_t>(dataset.samples.size());
  return dataset;
}

}  // namespace ferry
