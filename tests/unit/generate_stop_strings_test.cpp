// Stop strings with the demo tokenizer (data/tokenizer.model): a string that starts inside one
// generated token and ends inside another stops that row at the token completing it — tokens,
// mask and log-probs after it masked like after EOS, everything before it equal to a run without
// stop strings — and completion_of cuts the text right before it. Rows that never produce the
// string are untouched.
// Designated initializers below name only the options a test sets; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "src/generate/generate.h"
#include "src/generate/prompt_batch.h"
#include "src/generate/stop_strings.h"
#include "src/model/model_state.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

TEST(StopStrings, FindsTheEarliestAndRejectsEmpty) {
  const StopStrings stops({"\n\nUser", "END", "END"});
  EXPECT_EQ(stops.strings().size(), 2u);
  EXPECT_EQ(stops.find_in("The answer is 42.\n\nUser: hi END"), 17u);
  EXPECT_EQ(stops.find_in("ENDING\n\nUser"), 0u);
  EXPECT_EQ(stops.find_in("no stop here\n\nUse"), std::string::npos);
  EXPECT_TRUE(StopStrings().empty());
  EXPECT_THROW(StopStrings({"ok", ""}), UserError);
}

class GenerateStopStrings : public ::testing::Test {
 protected:
  static constexpr int64_t kSteps = 24;

  GenerateStopStrings() : tokenizer_(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model") {
    config_.vocab_size = tokenizer_.vocab_size();
    config_.hidden_size = 64;
    config_.intermediate_size = 128;
    config_.num_hidden_layers = 2;
    config_.num_attention_heads = 4;
    config_.num_key_value_heads = 2;
    config_.head_dim = 16;
    config_.max_position_embeddings = 128;
    model_ = CausalLM(config_);
    init_model_weights(*model_, config_, 0.5, 3);  // large weights: varied text
    model_->eval();
    std::vector<std::vector<int64_t>> prompts;
    for (const char* text : {"What is 2 + 3?", "Sort: 3 1 2 and then reverse"}) {
      std::vector<int64_t> ids{tokenizer_.bos_id()};
      for (int64_t id : tokenizer_.encode(text)) ids.push_back(id);
      prompts.push_back(ids);
    }
    batch_ = left_pad(prompts, tokenizer_.pad_id());
  }

  GenerateOptions options() const {
    return {.max_new_tokens = kSteps, .tokenizer = &tokenizer_, .pad_token_id = tokenizer_.pad_id()};
  }

  std::vector<int64_t> new_ids(const GenerateResult& result, int64_t row) const {
    std::vector<int64_t> ids;
    for (int64_t t = result.prompt_length; t < result.tokens.size(1); ++t) ids.push_back(result.tokens[row][t].item<int64_t>());
    return ids;
  }

  Tokenizer tokenizer_;
  ModelShape config_;
  CausalLM model_{nullptr};
  PromptBatch batch_;
};

TEST_F(GenerateStopStrings, MultiTokenStringStopsTheRowAndIsCut) {
  const GenerateResult free_run = generate(*model_, batch_.input_ids, batch_.attention_mask, options());
  ASSERT_EQ(free_run.tokens.size(1) - free_run.prompt_length, kSteps);
  const std::vector<int64_t> ids = new_ids(free_run, 0);
  const std::string text = tokenizer_.decode(ids);
  // Byte offset where each token's text starts in `text` (decoding prefixes).
  std::vector<size_t> starts;
  bool prefixes_consistent = true;
  for (size_t n = 0; n <= ids.size(); ++n) {
    const std::string prefix = tokenizer_.decode(std::vector<int64_t>(ids.begin(), ids.begin() + n));
    prefixes_consistent = prefixes_consistent && text.compare(0, prefix.size(), prefix) == 0;
    starts.push_back(prefix.size());
  }
  ASSERT_TRUE(prefixes_consistent) << text;

  // A stop string from the second character of token j to the first character of token j + 2:
  // it starts mid-token, covers token j + 1 and ends inside token j + 2 (which completes it).
  std::string stop;
  size_t first = 0, completing = 0;
  for (size_t j = 1; j + 2 < ids.size() && stop.empty(); ++j) {
    const size_t k = j + 2;
    if (starts[j + 1] - starts[j] < 2 || starts[k + 1] - starts[k] < 2) continue;
    const std::string candidate = text.substr(starts[j] + 1, starts[k] + 1 - (starts[j] + 1));
    if (text.find(candidate) != starts[j] + 1) continue;  // it must first appear here
    stop = candidate;
    first = starts[j] + 1;
    completing = k;
  }
  ASSERT_FALSE(stop.empty()) << "no multi-character tokens in the free run: " << text;
  const bool row1_has_it = tokenizer_.decode(new_ids(free_run, 1)).find(stop) != std::string::npos;

  GenerateOptions with_stop = options();
  with_stop.stop_strings = {stop};
  const GenerateResult result = generate(*model_, batch_.input_ids, batch_.attention_mask, with_stop);
  const int64_t p = result.prompt_length;
  for (int64_t t = 0; t < result.tokens.size(1) - p; ++t) {
    SCOPED_TRACE("step " + std::to_string(t) + ", stop string '" + stop + "' in '" + text + "'");
    if (t <= static_cast<int64_t>(completing)) {
      EXPECT_EQ(result.tokens[0][p + t].item<int64_t>(), ids[t]);
      EXPECT_EQ(result.attention_mask[0][p + t].item<int64_t>(), 1);
      EXPECT_NEAR(result.logprobs[0][t].item<float>(), free_run.logprobs[0][t].item<float>(), 1e-5);
    } else {
      EXPECT_EQ(result.tokens[0][p + t].item<int64_t>(), tokenizer_.pad_id());
      EXPECT_EQ(result.attention_mask[0][p + t].item<int64_t>(), 0);
      EXPECT_EQ(result.logprobs[0][t].item<float>(), 0.0f);
    }
  }
  const Completion completion = completion_of(result, 0, tokenizer_, {}, StopStrings({stop}));
  EXPECT_TRUE(completion.stopped);
  EXPECT_EQ(completion.text, text.substr(0, first));
  EXPECT_EQ(completion.ids.size(), completing + 1);
  EXPECT_EQ(completion.text.find(stop), std::string::npos);

  if (!row1_has_it) {  // the other row runs to the budget as before
    ASSERT_EQ(result.tokens.size(1), free_run.tokens.size(1));
    EXPECT_TRUE(torch::equal(result.tokens[1], free_run.tokens[1]));
    EXPECT_TRUE(torch::equal(result.attention_mask[1], free_run.attention_mask[1]));
    const Completion other = completion_of(result, 1, tokenizer_, {}, StopStrings({stop}));
    EXPECT_FALSE(other.stopped);
    EXPECT_EQ(other.text, tokenizer_.decode(new_ids(free_run, 1)));
  }
}

TEST_F(GenerateStopStrings, EveryRowStoppedEndsTheLoopAndStopIdsStillWork) {
  const GenerateResult free_run = generate(*model_, batch_.input_ids, batch_.attention_mask, options());
  // Each row's first two tokens' text as a stop string: both rows stop by step 2.
  GenerateOptions with_stop = options();
  for (int64_t row = 0; row < 2; ++row) {
    const std::vector<int64_t> ids = new_ids(free_run, row);
    const std::string text = tokenizer_.decode({ids[0], ids[1]});
    ASSERT_FALSE(text.empty());
    with_stop.stop_strings.push_back(text);
  }
  const GenerateResult result = generate(*model_, batch_.input_ids, batch_.attention_mask, with_stop);
  EXPECT_LE(result.tokens.size(1) - result.prompt_length, 2);

  // A stop id given beside stop strings ends the row at that id, which the completion leaves out.
  GenerateOptions by_id = options();
  by_id.stop_strings = {"a string the model will not write \x01"};
  const int64_t third = new_ids(free_run, 0)[2];
  by_id.stop_token_ids = {third};
  const GenerateResult stopped = generate(*model_, batch_.input_ids, batch_.attention_mask, by_id);
  const Completion completion = completion_of(stopped, 0, tokenizer_, {third}, StopStrings(by_id.stop_strings));
  EXPECT_TRUE(completion.stopped);
  const std::vector<int64_t> free_ids = new_ids(free_run, 0);
  EXPECT_LE(completion.ids.size(), 2u);  // the id may occur even earlier
  EXPECT_EQ(completion.ids, std::vector<int64_t>(free_ids.begin(), free_ids.begin() + completion.ids.size()));
}

TEST_F(GenerateStopStrings, StopStringsNeedATokenizer) {
  GenerateOptions no_tokenizer = options();
  no_tokenizer.tokenizer = nullptr;
  no_tokenizer.stop_strings = {"x"};
  EXPECT_THROW(generate(*model_, batch_.input_ids, batch_.attention_mask, no_tokenizer), UserError);
}

}  // namespace
}  // namespace ferry
