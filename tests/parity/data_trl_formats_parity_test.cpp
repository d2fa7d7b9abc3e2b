// TRL's dataset types read as TRL 1.16 reads them (tests/parity/data_trl_formats_ref.py): rows of every
// type, standard (text) and conversational (messages), with the real SmolLM2-135M-Instruct tokenizer and
// chat template. The reference is TRL's own trainers' dataset preparation:
//   - SFT (SFTTrainer): language modelling text rows (ids and every token trained), prompt-completion
//     rows, text and messages (ids, and the loss only on the completion: completion_only_loss);
//     conversational `messages` rows: ids (Ferry trains the assistant turns only, TRL's
//     assistant_only_loss, which SmolLM2's template cannot mark for TRL: the mask is not compared);
//   - DPO (DPOTrainer): explicit and implicit prompts, ids of prompt + chosen / rejected and the loss
//     after the prompt;
//   - reward model (RewardTrainer): the same rows' ids;
//   - KTO (KTOTrainer): unpaired rows' ids, loss mask and label.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/file_util.h"
#include "src/data/preference_dataset.h"
#include "src/data/sft_dataset.h"
#include "src/data/unpaired_dataset.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

const std::string kFixtures = std::string(FERRY_FIXTURES_DIR) + "/data_trl_formats/";
constexpr int64_t kNoLimit = 4096;

std::vector<int64_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }
std::vector<uint8_t> mask_of(const nlohmann::json& j) {
  std::vector<uint8_t> out;
  for (const auto& v : j) out.push_back(static_cast<uint8_t>(v.get<int>()));
  return out;
}

class TrlFormats : public ::testing::Test {
 protected:
  void SetUp() override {
    expected_ = nlohmann::json::parse(read_file(kFixtures + "expected.json"));
    if (expected_.contains("skip")) GTEST_SKIP() << expected_["skip"].get<std::string>();
    tokenizer_ = std::make_unique<Tokenizer>(kFixtures + "smollm2_tokenizer");
    template_ = resolve_chat_template("auto", *tokenizer_);
  }
  std::string file(const std::string& name) const { return kFixtures + name + ".jsonl"; }

  nlohmann::json expected_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ChatTemplate template_;
};

TEST_F(TrlFormats, SftRowsTokeniseAsSftTrainer) {
  int cases = 0;
  for (const auto& [name, c] : expected_.items()) {
    if (c["stage"] != "sft") continue;
    SCOPED_TRACE(name);
    ++cases;
    const SftDataset data = load_sft_dataset(file(name), *tokenizer_, template_, kNoLimit, false);
    ASSERT_EQ(data.samples.size(), c["rows"].size());
    for (size_t i = 0; i < data.samples.size(); ++i) {
      EXPECT_EQ(data.samples[i].ids, ids_of(c["rows"][i]["ids"])) << "row " << i;
      if (name != "sft_messages") EXPECT_EQ(data.samples[i].loss_mask, mask_of(c["rows"][i]["mask"])) << "row " << i;
    }
  }
  EXPECT_EQ(cases, 4);
}

TEST_F(TrlFormats, PreferenceRowsTokeniseAsDpoAndRewardTrainers) {
  int dpo = 0, rm = 0;
  for (const auto& [name, c] : expected_.items()) {
    if (c["stage"] != "dpo" && c["stage"] != "rm") continue;
    SCOPED_TRACE(name);
    const bool is_rm = c["stage"] == "rm";
    ++(is_rm ? rm : dpo);
    const PreferenceDataset data =
        load_preference_dataset(file(is_rm ? c["file"].get<std::string>() : name), *tokenizer_, template_, kNoLimit,
                                false);
    ASSERT_EQ(data.pairs.size(), c["rows"].size());
    for (size_t i = 0; i < data.pairs.size(); ++i) {
      const auto& row = c["rows"][i];
      EXPECT_EQ(data.pairs[i].chosen.ids, ids_of(row["chosen"])) << "row " << i;
      EXPECT_EQ(data.pairs[i].rejected.ids, ids_of(row["rejected"])) << "row " << i;
      if (!is_rm) {
        EXPECT_EQ(data.pairs[i].chosen.loss_mask, mask_of(row["chosen_mask"])) << "row " << i;
        EXPECT_EQ(data.pairs[i].rejected.loss_mask, mask_of(row["rejected_mask"])) << "row " << i;
      }
    }
  }
  EXPECT_EQ(dpo, 4);
  EXPECT_EQ(rm, 4);
}

TEST_F(TrlFormats, UnpairedRowsTokeniseAsKtoTrainer) {
  int cases = 0;
  for (const auto& [name, c] : expected_.items()) {
    if (c["stage"] != "kto") continue;
    SCOPED_TRACE(name);
    ++cases;
    const UnpairedDataset data = load_unpaired_dataset(file(name), *tokenizer_, template_, kNoLimit, false);
    ASSERT_EQ(data.examples.size(), c["rows"].size());
    for (size_t i = 0; i < data.examples.size(); ++i) {
      EXPECT_EQ(data.examples[i].sample.ids, ids_of(c["rows"][i]["ids"])) << "row " << i;
      EXPECT_EQ(data.examples[i].sample.loss_mask, mask_of(c["rows"][i]["mask"])) << "row " << i;
      EXPECT_EQ(data.examples[i].desirable, c["rows"][i]["label"].get<bool>()) << "row " << i;
    }
  }
  EXPECT_EQ(cases, 2);
}

}  // namespace
}  // namespace ferry
