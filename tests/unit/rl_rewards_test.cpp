// Rewards: the verifier's three ways of matching an answer, the weighted mix (a verifier has no
// value without gt_answer and is then left out of the sum, as TRL leaves out a reward that returns
// None), and the reward command process — many answers in flight without a deadlock, nan as a
// number, and a crash, a hang and a non-number as errors that name the command and the prompt.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/support/scratch_dir.h"
#include "train/rl/answer_match.h"
#include "train/rl/reward_command.h"
#include "train/rl/rewards.h"

namespace ferry {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in: " << (haystack)

TEST(Rewards, VerifierMatchesExactNumericAndContains) {
  EXPECT_TRUE(rl::answer_matches("  42 <|end|>", "42", AnswerMatch::exact, "<|end|>"));
  EXPECT_FALSE(rl::answer_matches("42.0", "42", AnswerMatch::exact, "<|end|>"));
  EXPECT_TRUE(rl::answer_matches("42.0", "42", AnswerMatch::numeric, ""));
  EXPECT_TRUE(rl::answer_matches("so the answer is -7", "-7", AnswerMatch::numeric, ""));
  EXPECT_TRUE(rl::answer_matches("first 3, then 1,234", "1234", AnswerMatch::numeric, ""));
  EXPECT_TRUE(rl::answer_matches("about 2e3", "2000", AnswerMatch::numeric, ""));
  EXPECT_FALSE(rl::answer_matches("12 then 13", "12", AnswerMatch::numeric, ""));  // the last number counts
  EXPECT_FALSE(rl::answer_matches("no number", "5", AnswerMatch::numeric, ""));
  EXPECT_TRUE(rl::answer_matches("The capital is Paris.", "Paris", AnswerMatch::contains, ""));
  EXPECT_FALSE(rl::answer_matches("The capital is paris.", "Paris", AnswerMatch::contains, ""));
  EXPECT_FALSE(rl::answer_matches("anything", "", AnswerMatch::contains, ""));
  ASSERT_TRUE(rl::last_number("x=.5").has_value());
  EXPECT_DOUBLE_EQ(*rl::last_number("x=.5"), 0.5);
}

rl::RolloutPrompt prompt(std::string text, std::string answer, int64_t line) {
  rl::RolloutPrompt p;
  p.text = std::move(text);
  p.gt_answer = std::move(answer);
  p.line = line;
  return p;
}

TEST(Rewards, WeightedMixLeavesOutRewardsWithoutAValue) {
  const std::vector<rl::RolloutPrompt> prompts{prompt("2+2?", "4", 1), prompt("say hi", "", 2)};
  RewardConfig verifier;  // exact, weight 1
  RewardConfig model;
  model.kind = RewardKind::model;
  model.path = "rm";
  model.weight = 0.5;
  std::ostringstream log;
  rl::RewardMix mix({verifier, model}, {.prompts = 2, .with_answer = 1}, "p.jsonl", "", log);
  EXPECT_CONTAINS(log.str(), "1 of 2 prompts in p.jsonl have no gt_answer");
  EXPECT_EQ(mix.model_path(), "rm");
  const rl::RewardScores s = mix.score({"4", "hi", "5"}, {&prompts[0], &prompts[1], &prompts[0]}, {2.0, -1.0, 0.0});
  ASSERT_EQ(s.total.size(), 3u);
  EXPECT_DOUBLE_EQ(s.total[0], 1.0 + 0.5 * 2.0);
  EXPECT_DOUBLE_EQ(s.total[1], 0.5 * -1.0);  // no gt_answer: no verifier term
  EXPECT_DOUBLE_EQ(s.total[2], 0.0);
  ASSERT_EQ(s.means.size(), 2u);
  EXPECT_EQ(s.means[0].first, "reward/verifier");
  EXPECT_DOUBLE_EQ(s.means[0].second, 0.5);  // over the 2 responses it scored
  EXPECT_EQ(s.means[1].first, "reward/model");
  EXPECT_DOUBLE_EQ(s.means[1].second, 1.0 / 3.0);
  // A verifier with no gt_answer anywhere is a config error naming the file.
  try {
    rl::RewardMix bad({verifier}, {.prompts = 1, .with_answer = 0}, "q.jsonl", "", log);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "q.jsonl has none");
  }
}

std::string script(const std::string& name, const std::string& text) {
  const auto dir = ferry::test_support::process_scratch_dir("ferry_rewards_test");
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

// 2000 requests of ~4 KB (8 MB, far beyond a pipe's buffer) to a program that answers each as it
// reads it: writing and reading at once never deadlocks.
TEST(Rewards, CommandAnswersManyLongRequestsInOrder) {
  rl::RewardCommand command("python3 -c \"import sys\nfor l in sys.stdin: print(len(l), flush=True)\"", 30);
  std::vector<std::string> requests;
  for (int i = 0; i < 2000; ++i) requests.push_back("{\"response\": \"" + std::string(4000 + i % 7, 'a') + "\"}");
  const std::vector<double> answers = command.score(requests, [](size_t i) { return std::to_string(i); });
  ASSERT_EQ(answers.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(answers[i], static_cast<double>(requests[i].size() + 1)) << i;
  // It stays up for the next batch; nan is a number (the stage leaves that response out).
  rl::RewardCommand nan_command("while read line; do echo nan; done", 30);
  const std::vector<double> nan_answers = nan_command.score({"{}", "{}"}, [](size_t) { return std::string("p"); });
  ASSERT_EQ(nan_answers.size(), 2u);
  EXPECT_TRUE(std::isnan(nan_answers[1]));
}

std::string command_error(const std::string& program, double timeout) {
  rl::RewardCommand command(program, timeout);
  try {
    command.score({"{\"a\": 1}", "{\"a\": 2}"}, [](size_t i) { return "prompt #" + std::to_string(i); });
  } catch (const rl::RewardCommandError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a RewardCommandError from " << program;
  return "";
}

TEST(Rewards, CommandFailuresNameTheCommandAndThePrompt) {
  const std::string crash = command_error("sh " + script("crash.sh", "read line; echo 1; exit 4\n"), 10);
  EXPECT_CONTAINS(crash, "reward command `sh ");
  EXPECT_CONTAINS(crash, "exited with status 4");
  EXPECT_CONTAINS(crash, "prompt #1");  // the first answer came; the second did not
  const std::string hang = command_error("sleep 20", 0.5);
  EXPECT_CONTAINS(hang, "no answer within 0.5 s");
  EXPECT_CONTAINS(hang, "prompt #0");
  const std::string word = command_error("while read line; do echo 1; echo oops; done", 10);
  EXPECT_CONTAINS(word, "answered 'oops', not a number");
  EXPECT_CONTAINS(word, "prompt #1");
}

}  // namespace
}  // namespace ferry
