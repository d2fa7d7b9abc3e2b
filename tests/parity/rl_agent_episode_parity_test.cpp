// One tool-using episode against TRL 1.16's own multi-turn code (tests/parity/rl_agent_episode_ref.py:
// GRPOTrainer._tool_call_loop, _get_tool_suffix_ids and _compute_loss, called on stubs): Ferry builds
// the same episode with its own parts and the real scripts/envs/calculator.py over the environment
// protocol — the prompt rendered with the tools the environment's reset gives, turn 1's tool call
// parsed (hermes, recognised from Qwen2.5's template), the tool's answer from a `step`, and its
// continuation ids — and gets TRL's ids, tool mask (the loss mask), the model's per-token
// log-probs, and GRPO's loss and gradient for every loss type.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <string>

#include "core/file_util.h"
#include "src/data/conversation_json.h"
#include "src/generate/tool_call_parser.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/jinja_chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/turn_continuation.h"
#include "train/rl/environment_pool.h"
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

Json answer(EnvironmentPool& pool) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    for (const EnvReply& r : pool.poll(200)) {
      EXPECT_EQ(r.fault, EnvFault::none) << r.error;
      return r.body;
    }
  }
  ADD_FAILURE() << "the calculator did not answer";
  return nullptr;
}

TEST(AgentEpisodeParity, TheEpisodeMaskLogProbsAndLossAreTrls) {
  const std::string folder = kFixture + "model";
  const Tokenizer tokenizer(folder);
  const ChatTemplate tmpl = resolve_chat_template("auto", tokenizer);
  ASSERT_NE(tmpl.jinja, nullptr);
  const int64_t end = tokenizer.piece_to_id("<|im_end|>");

  // reset: the calculator gives its tools; the prompt renders with them.
  EnvironmentPool pool(std::string("python3 ") + FERRY_SOURCE_DIR + "/scripts/envs/calculator.py", 1, 20);
  const Json line{{"messages", Json::array({{{"role", "user"}, {"content", episode()["question"]}}})}, {"gt_answer", "8"}};
  pool.send(0, Json{{"type", "reset"}, {"prompt", line}});
  const Json reset = answer(pool);
  ChatContext context;
  context.tools = reset.at("tools");
  const Conversation prompt = conversation_from_json(line, "messages");
  EXPECT_EQ(tmpl.render_prompt(prompt, tokenizer, context), ids("prompt_ids"));

  // Turn 1: TRL's ids are what Ferry's tokenizer makes of the text; its tool call parses.
  std::vector<int64_t> turn1 = tokenizer.encode(episode()["turn1"].get<std::string>());
  turn1.push_back(end);
  ASSERT_EQ(turn1, ids("turn1_ids"));
  const ToolCallFormat format = tool_call_format_of(tmpl.jinja->source_text(), ToolCallFormat::auto_);
  EXPECT_EQ(format, ToolCallFormat::hermes);
  const ParsedAssistantTurn parsed = parse_tool_calls(episode()["turn1"].get<std::string>(), format);
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0]["function"]["arguments"], Json({{"expression", "2 + 2 * 3"}}));

  // step: the calculator answers with a tool message, as TRL's loop called the tool.
  Json message{{"role", "assistant"}, {"content", parsed.content}, {"tool_calls", parsed.tool_calls}};
  pool.send(0, Json{{"type", "step"}, {"turn", 1}, {"message", message}, {"text", episode()["turn1"]}});
  const Json step = answer(pool);
  ASSERT_EQ(step.at("messages").size(), 1u);
  EXPECT_EQ(step["messages"][0]["content"], episode()["tool_messages"][0]["content"]);
  const Conversation reply = conversation_from_json(step, "messages");
  const std::vector<int64_t> suffix = turn_continuation_ids(tmpl, tokenizer, reply, context, {end});
  EXPECT_EQ(suffix, ids("suffix_ids"));

  // The episode: ids and loss mask.
  std::vector<int64_t> completion = turn1, mask;
  completion.insert(completion.end(), suffix.begin(), suffix.end());
  const std::vector<int64_t> turn2 = ids("turn2_ids");
  completion.insert(completion.end(), turn2.begin(), turn2.end());
  mask.assign(turn1.size(), 1);
  mask.insert(mask.end(), suffix.size(), 0);
  mask.insert(mask.end(), turn2.size(), 1);
  ASSERT_EQ(completion, ids("completion_ids"));
  ASSERT_EQ(mask, ids("tool_mask"));

  // The model's log-probs of the episode's tokens.
  LlamaForCausalLM model = causal_lm_from_pretrained(folder);
  torch::NoGradGuard no_grad;
  std::vector<int64_t> all = ids("prompt_ids");
  const int64_t p = static_cast<int64_t>(all.size()), t = static_cast<int64_t>(completion.size());
  all.insert(all.end(), completion.begin(), completion.end());
  const torch::Tensor logp =
      torch::log_softmax(model->forward(torch::tensor(all).unsqueeze(0)).to(torch::kFloat), -1).squeeze(0);
  const torch::Tensor old = torch::tensor(episode()["old_logps"].get<std::vector<float>>());
  for (int64_t i = 0; i < t; ++i) {
    EXPECT_NEAR(logp[p - 1 + i][completion[static_cast<size_t>(i)]].item<double>(), old[i].item<double>(), 1e-5) << i;
  }

  // GRPO's loss on the episode, every loss type.
  const torch::Tensor loss_mask = torch::tensor(mask, torch::kLong).to(torch::kFloat).unsqueeze(0);
  for (const auto& [name, loss_type] : std::vector<std::pair<std::string, GrpoLoss>>{
           {"dapo", GrpoLoss::dapo}, {"grpo", GrpoLoss::grpo}, {"bnpo", GrpoLoss::bnpo}, {"dr_grpo", GrpoLoss::dr_grpo}}) {
    SCOPED_TRACE(name);
    torch::AutoGradMode grad(true);
    const torch::Tensor fresh =
        torch::tensor(episode()["new_logps"].get<std::vector<float>>()).unsqueeze(0).requires_grad_(true);
    GrpoLossSettings settings;
    settings.loss_type = loss_type;
    GrpoLossScale scale;
    scale.rollout_tokens = loss_mask.sum().item<double>();
    scale.max_completion_length = 256;
    const GrpoLossTerms terms = grpo_loss(fresh, old.unsqueeze(0), torch::Tensor(), torch::tensor({0.7F}), loss_mask,
                                          settings, scale);
    terms.loss.backward();
    const Json& want = episode()["losses"][name];
    EXPECT_NEAR(terms.loss.item<double>(), want["loss"].get<double>(), 1e-6);
    const std::vector<double> grad_want = want["grad"].get<std::vector<double>>();
    for (int64_t i = 0; i < t; ++i) EXPECT_NEAR(fresh.grad()[0][i].item<double>(), grad_want[static_cast<size_t>(i)], 1e-6) << i;
  }
}

}  // namespace
}  // namespace ferry::rl
