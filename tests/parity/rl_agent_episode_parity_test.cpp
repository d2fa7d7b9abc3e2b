// One tool-using episode against TRL 1.16's own multi-turn code (tests/parity/rl_agent_episode_ref.py:
// GRPOTrainer._tool_call_loop, _get_tool_suffix_ids and _compute_loss, called on stubs). Ferry's
// episode runner (train/rl/episode_runner.h), the code a GRPO rollout with rollout.environment runs,
// plays the episode against the real scripts/envs/calculator.py over the environment protocol, with
// generation stubbed to give the turns TRL's stub gave (turn 1 for the prompt, turn 2 after the
// tool's answer). The runner renders the prompt with the tools the reset gives, parses turn 1's tool
// call (hermes, recognised from Qwen2.5's template), steps the calculator and appends the template's
// continuation; its output must be TRL's: the ids the generator is asked to continue, the episode's
// ids and its response mask (TRL's tool mask, the loss mask), and from them the model's per-token
// log-probs and GRPO's loss and gradient for every loss type.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "src/data/conversation_json.h"
#include "src/generate/chat_generate_options.h"
#include "src/generate/tool_call_parser.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/jinja_chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "train/rl/environment_pool.h"
#include "train/rl/episode_runner.h"
#include "train/rl/grpo_loss.h"

namespace ferry::rl {
namespace {

using Json = nlohmann::ordered_json;

const std::string kFixture = std::string(FERRY_FIXTURES_DIR) + "/rl_agent_episode/";

const Json& episode() {
  static const Json json = Json::parse(read_file(kFixture + "episode.json"));
  return json;
}

std::vector<int64_t> ids(const char* key) { return episode()[key].get<std::vector<int64_t>>(); }

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// Where two id lists part (gtest prints only their first 32 ids).
std::string where_they_differ(const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
  const auto at = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
  return "lengths " + std::to_string(got.size()) + " and " + std::to_string(want.size()) + ", first difference at " +
         std::to_string(at.first - got.begin());
}

// Stands in for generate(): call k returns turns[k] after the batch's prompt, as generate() lays a
// result out, and keeps the ids it was asked to continue (the batch's counted ids, row by row).
struct ScriptedTurns {
  std::vector<std::vector<int64_t>> turns;
  std::vector<std::vector<int64_t>> asked;

  GenerateResult operator()(CausalLMImpl&, const at::Tensor& input_ids, const at::Tensor& attention_mask,
                            const GenerateOptions& options) {
    EXPECT_EQ(input_ids.size(0), 1) << "one episode, one row";
    asked.push_back(to_vector(input_ids[0].masked_select(attention_mask[0] != 0)));
    std::vector<int64_t> turn;
    if (asked.size() <= turns.size()) {
      turn = turns[asked.size() - 1];
    } else {  // end the extra turn at once
      ADD_FAILURE() << "the runner asked for turn " << asked.size() << "; TRL's loop generated " << turns.size();
      turn = {options.eos_token_ids.at(0)};
    }
    EXPECT_LE(static_cast<int64_t>(turn.size()), options.max_new_tokens) << "turn " << asked.size();
    const auto n = static_cast<int64_t>(turn.size());
    GenerateResult out;
    out.prompt_length = input_ids.size(1);
    out.tokens = torch::cat({input_ids, torch::tensor(turn, torch::kLong).unsqueeze(0)}, 1);
    out.attention_mask = torch::cat({attention_mask, torch::ones({1, n}, torch::kLong)}, 1);
    out.logprobs = torch::zeros({1, n});
    return out;
  }
};

TEST(AgentEpisodeParity, TheRunnersEpisodeMaskLogProbsAndLossAreTrls) {
  const std::string folder = kFixture + "model";
  const Tokenizer tokenizer(folder);
  const ChatTemplate tmpl = resolve_chat_template("auto", tokenizer);
  ASSERT_NE(tmpl.jinja, nullptr);
  CausalLM model = causal_lm_from_pretrained(folder);

  // The prompt line as a GRPO run loads it; the calculator's reset adds its tools.
  const Json line{{"messages", Json::array({{{"role", "user"}, {"content", episode()["question"]}}})}, {"gt_answer", "8"}};
  RolloutPrompt prompt;
  prompt.conversation = conversation_from_json(line, "messages");
  prompt.ids = tmpl.render_prompt(prompt.conversation, tokenizer, prompt.context);
  prompt.source = line.dump();
  prompt.text = episode()["question"].get<std::string>();
  prompt.gt_answer = "8";
  prompt.line = 1;

  // The runner as rollout_environment.cpp makes it (TRL's max_completion_length 256 is the
  // episode's budget after the prompt), generation stubbed with TRL's two turns.
  EnvironmentPool pool(std::string("python3 ") + FERRY_SOURCE_DIR + "/scripts/envs/calculator.py", 1, 20);
  EpisodeSettings settings;
  settings.max_turns = 4;
  settings.max_total_tokens = 256;
  settings.tool_call_format = tool_call_format_of(tmpl.jinja->source_text(), ToolCallFormat::auto_);
  EXPECT_EQ(settings.tool_call_format, ToolCallFormat::hermes);
  ScriptedTurns turns;
  turns.turns = {ids("turn1_ids"), ids("turn2_ids")};
  std::ostringstream log;
  EpisodeRunner runner(pool, tokenizer, tmpl, settings, log, std::ref(turns));
  GenerateOptions options = chat_generate_options(model->config(), tokenizer, &tmpl);
  options.max_new_tokens = 256;
  std::vector<at::Generator> greedy;
  EpisodeTally tally;
  const Experience out = runner.run(*model, options, {&prompt}, greedy, 0, tally);
  EXPECT_EQ(log.str(), "");

  // What the policy was asked to continue: the prompt with the tools; then prompt, turn 1 and the
  // tool's answer, as TRL's loop asked its generator.
  ASSERT_EQ(turns.asked.size(), 2u);
  EXPECT_EQ(turns.asked[0], ids("prompt_ids")) << where_they_differ(turns.asked[0], ids("prompt_ids"));
  EXPECT_EQ(turns.asked[1], ids("turn2_context_ids")) << where_they_differ(turns.asked[1], ids("turn2_context_ids"));

  // The episode: ids and loss mask, as the runner hands them to the learner.
  ASSERT_EQ(out.rows(), 1);
  const int64_t p = out.prompt_length;
  EXPECT_EQ(to_vector(out.sequences[0].slice(0, 0, p)), ids("prompt_ids"));
  EXPECT_EQ(out.attention_mask.sum().item<int64_t>(), out.sequences.size(1)) << "one row: no padding";
  const std::vector<int64_t> completion = to_vector(out.sequences[0].slice(0, p));
  const std::vector<int64_t> mask = to_vector(out.response_mask[0]);
  ASSERT_EQ(completion, ids("completion_ids")) << where_they_differ(completion, ids("completion_ids"));
  ASSERT_EQ(mask, ids("tool_mask")) << where_they_differ(mask, ids("tool_mask"));

  // The calculator saw TRL's tool call and the final answer: one call, done, reward 1.
  EXPECT_EQ(tally.turns, 2);
  EXPECT_EQ(tally.tool_calls, 1);
  EXPECT_EQ(tally.done, 1);
  EXPECT_TRUE(out.ended[0].item<bool>());
  EXPECT_EQ(out.env_rewards[0].item<float>(), 1.0F);
  EXPECT_EQ(out.responses, std::vector<std::string>{episode()["turn2"].get<std::string>()});

  // The model's log-probs of the episode's tokens.
  torch::NoGradGuard no_grad;
  const int64_t t = static_cast<int64_t>(completion.size());
  const torch::Tensor logp = torch::log_softmax(model->forward(out.sequences).to(torch::kFloat), -1).squeeze(0);
  const torch::Tensor old = torch::tensor(episode()["old_logps"].get<std::vector<float>>());
  for (int64_t i = 0; i < t; ++i) {
    EXPECT_NEAR(logp[p - 1 + i][completion[static_cast<size_t>(i)]].item<double>(), old[i].item<double>(), 1e-5) << i;
  }

  // GRPO's loss on the episode, every loss type.
  const torch::Tensor loss_mask = out.response_mask;
  for (const auto& [name, loss_type] : std::vector<std::pair<std::string, GrpoLoss>>{
           {"dapo", GrpoLoss::dapo}, {"grpo", GrpoLoss::grpo}, {"bnpo", GrpoLoss::bnpo}, {"dr_grpo", GrpoLoss::dr_grpo}}) {
    SCOPED_TRACE(name);
    torch::AutoGradMode grad(true);
    const torch::Tensor fresh =
        torch::tensor(episode()["new_logps"].get<std::vector<float>>()).unsqueeze(0).requires_grad_(true);
    GrpoLossSettings loss_settings;
    loss_settings.loss_type = loss_type;
    GrpoLossScale scale;
    scale.rollout_tokens = loss_mask.sum().item<double>();
    scale.max_completion_length = 256;
    const GrpoLossTerms terms = grpo_loss(fresh, old.unsqueeze(0), torch::Tensor(), torch::tensor({0.7F}), loss_mask,
                                          loss_settings, scale);
    terms.loss.backward();
    const Json& want = episode()["losses"][name];
    EXPECT_NEAR(terms.loss.item<double>(), want["loss"].get<double>(), 1e-6);
    const std::vector<double> grad_want = want["grad"].get<std::vector<double>>();
    for (int64_t i = 0; i < t; ++i) EXPECT_NEAR(fresh.grad()[0][i].item<double>(), grad_want[static_cast<size_t>(i)], 1e-6) << i;
  }
}

}  // namespace
}  // namespace ferry::rl
