// Multi-turn episodes (train/rl/episode_runner.h) on a tiny random Llama with Qwen2.5's own chat
// template (tools and all; the fixture folder of tests/parity/generate_chat_template_ref.py), against
// tests/data/scripted_env.py:
//   - an episode's ids decode to the template's rendering of the whole conversation (its turns as
//     assistant messages, the environment's replies between them), and only the policy's turns
//     are in the response mask;
//   - a tool reply continues with exactly the ids Qwen2.5 writes for tool results;
//   - scoring (batched, left-padded) and PPO's GAE over episodes with holes equal a naive loop:
//     one plain forward per episode alone, and the recursion over its policy tokens only;
//   - an episode's tokens do not depend on which episodes it was generated beside (environments
//     answering after 0, 30 or 60 ms, or each episode alone);
//   - max_turns, max_total_tokens and a crashing environment end episodes as documented.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "core/file_util.h"
#include "offload/engine.h"
#include "src/generate/chat_generate_options.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/turn_continuation.h"
#include "tests/support/scratch_dir.h"
#include "train/rl/advantages.h"
#include "train/rl/environment_pool.h"
#include "train/rl/episode_runner.h"
#include "train/rl/experience_gatherer.h"
#include "train/rl/policy_losses.h"
#include "train/rl/rollout_advantages.h"

namespace fs = std::filesystem;

namespace ferry::rl {
namespace {

using Json = nlohmann::ordered_json;

const std::string kScripted = std::string("python3 ") + FERRY_SOURCE_DIR + "/tests/data/scripted_env.py";

// Removed when the process exits, unless a test failed (kept to inspect).
fs::path scratch() {
  static const fs::path dir = [] {
    const fs::path d = test_support::process_scratch_dir(
        "ferry_episode_test", [] { return ::testing::UnitTest::GetInstance()->Failed(); });
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// The fixture's Qwen2.5-like folder with Qwen2.5's real template (tool branches included).
struct World {
  fs::path folder;
  std::unique_ptr<Tokenizer> tokenizer;
  ChatTemplate tmpl;
  CausalLM model{nullptr};
  int64_t im_end = 0;

  // `positions` > 0: the model's max_position_embeddings set to it (a model whose positions run out).
  explicit World(int64_t positions = 0) {
    folder = scratch() / (positions > 0 ? "model" + std::to_string(positions) : "model");
    fs::copy(std::string(FERRY_FIXTURES_DIR) + "/generate_chat_template/qwen25_no_tools", folder,
             fs::copy_options::recursive);
    if (positions > 0) {
      Json config = Json::parse(read_file((folder / "config.json").string()));
      config["max_position_embeddings"] = positions;
      std::ofstream(folder / "config.json") << config.dump(1);
    }
    fs::copy_file(std::string(FERRY_SOURCE_DIR) + "/configs/templates/jinja/qwen2.5/Qwen2.5-7B-Instruct.jinja",
                  folder / "chat_template.jinja");
    tokenizer = std::make_unique<Tokenizer>(folder.string());
    tmpl = resolve_chat_template("auto", *tokenizer);
    model = causal_lm_from_pretrained(folder.string());
    im_end = tokenizer->piece_to_id("<|im_end|>");
    make_turns_end();
  }

  // A random model samples <|im_end|> 1 time in 700: lean its row toward the mean hidden state
  // until about a quarter of the steps end the turn, so episodes have several turns.
  void make_turns_end() {
    torch::NoGradGuard no_grad;
    torch::manual_seed(5);
    const torch::Tensor ids = torch::randint(3, 600, {8, 24}, torch::kLong);
    const torch::Tensor hidden = model->model->forward(ids).reshape({-1, model->config().hidden_size});
    const torch::Tensor mean = hidden.mean(0);
    torch::Tensor row = model->lm_head->weight[im_end];
    const torch::Tensor original = row.clone();
    double low = 0, high = 50;
    for (int i = 0; i < 30; ++i) {
      const double c = (low + high) / 2;
      row.copy_(original + c * mean / mean.dot(mean));
      const double p = torch::softmax(model->logits(hidden).to(torch::kFloat), -1).select(1, im_end).mean().item<double>();
      (p < 0.25 ? low : high) = c;
    }
  }
};

World& world() {
  static World w;
  return w;
}

// Text of `ids` with special tokens written out ("<|im_end|>"), as the template writes them.
std::string decode_with_specials(const std::vector<int64_t>& ids) {
  const Tokenizer& t = *world().tokenizer;
  std::map<int64_t, std::string> specials;
  for (const auto& [text, id] : t.control_pieces()) specials[id] = text;
  std::string out;
  std::vector<int64_t> run;
  for (int64_t id : ids) {
    if (specials.count(id) > 0) {
      out += t.decode(run) + specials[id];
      run.clear();
    } else {
      run.push_back(id);
    }
  }
  return out + t.decode(run);
}

// One prompt line per environment script; `same_question` lines in a row ask the same question (a
// GRPO group: their scoring shares the prompt's forward, train.share_prompts).
std::vector<RolloutPrompt> write_prompts(const std::string& name, const std::vector<Json>& envs, size_t same_question = 1) {
  const fs::path path = scratch() / (name + ".jsonl");
  std::ofstream out(path);
  for (size_t i = 0; i < envs.size(); ++i) {
    out << Json{{"messages", Json::array({{{"role", "user"}, {"content", "Question " + std::to_string(i / same_question)}}})},
                {"env", envs[i]}}
               .dump()
        << "\n";
  }
  out.close();
  std::ostringstream log;
  return PromptFile(path.string(), *world().tokenizer, world().tmpl, {}, log).load_all();
}

GenerateOptions turn_options(int64_t max_new_tokens) {
  GenerateOptions o = chat_generate_options(world().model->config(), *world().tokenizer, &world().tmpl);
  o.eos_token_ids = {world().im_end};  // turns end as the template ends them, nowhere else
  o.stop_token_ids.clear();
  o.stop_strings.clear();
  o.max_new_tokens = max_new_tokens;
  o.sampling.greedy = false;
  o.sampling.temperature = 1.0;
  return o;
}

struct EpisodesRun {
  Experience experience;
  EpisodeTally tally;
};

EpisodesRun run_episodes(const std::vector<RolloutPrompt>& prompts, int64_t workers, EpisodeSettings settings,
                         int64_t max_new_tokens = 10, double timeout = 20, World& w = world(), int64_t first_row = 0) {
  EnvironmentPool pool(kScripted, workers, timeout);
  std::ostringstream log;
  EpisodeRunner runner(pool, *w.tokenizer, w.tmpl, settings, log);
  std::vector<const RolloutPrompt*> rows;
  for (const RolloutPrompt& p : prompts) rows.push_back(&p);
  std::vector<at::Generator> generators = rollout_row_generators(7, 0, first_row, static_cast<int64_t>(rows.size()));
  EpisodesRun out;
  out.experience = runner.run(*w.model, turn_options(max_new_tokens), rows, generators, 0, out.tally);
  return out;
}

// Row `row`'s counted ids (prompt and episode), and its episode's runs of policy / environment tokens.
struct Row {
  std::vector<int64_t> ids;
  std::vector<std::vector<int64_t>> turns, replies;  // policy runs; environment runs after each turn
};

Row row_of(const Experience& e, int64_t row) {
  Row out;
  const int64_t p = e.prompt_length;
  for (int64_t c = 0; c < e.sequences.size(1); ++c) {
    if (e.attention_mask[row][c].item<int64_t>() == 0) continue;
    const int64_t id = e.sequences[row][c].item<int64_t>();
    out.ids.push_back(id);
    if (c < p) continue;
    const bool policy = e.response_mask[row][c - p].item<float>() > 0;
    const bool was_policy = c > p && e.response_mask[row][c - p - 1].item<float>() > 0 && e.attention_mask[row][c - 1].item<int64_t>() != 0;
    if (policy && (c == p || !was_policy)) out.turns.emplace_back();
    if (!policy && (c == p || was_policy)) out.replies.emplace_back();
    (policy ? out.turns : out.replies).back().push_back(id);
  }
  return out;
}

Json user(const std::string& text) { return Json{{"role", "user"}, {"content", text}}; }

TEST(EpisodeRunner, AnEpisodeIsTheTemplatesRenderingOfItsConversation) {
  std::vector<Json> envs;
  for (int i = 0; i < 6; ++i) {
    envs.push_back({{"steps", Json::array({{{"messages", Json::array({user(std::string(static_cast<size_t>(i + 1), 'L') + " lower")})}},
                                           {{"messages", Json::array({user("again " + std::to_string(i))})}}})},
                    {"reward", i}});
  }
  const std::vector<RolloutPrompt> prompts = write_prompts("layout", envs);
  const EpisodesRun run = run_episodes(prompts, 2, {.max_turns = 3, .max_total_tokens = 200});
  const Experience& e = run.experience;
  ASSERT_EQ(e.rows(), 6);
  int multi_turn = 0;
  for (int64_t i = 0; i < e.rows(); ++i) {
    SCOPED_TRACE("episode " + std::to_string(i));
    const Row r = row_of(e, i);
    ASSERT_FALSE(r.turns.empty());
    multi_turn += r.turns.size() > 1 ? 1 : 0;
    // The conversation as a template sees it: each turn's text an assistant message, the replies
    // the environment gave after it as user messages; the last turn as generated.
    Conversation conversation = prompts[static_cast<size_t>(i)].conversation;
    const std::vector<std::string> replies{std::string(static_cast<size_t>(i + 1), 'L') + " lower", "again " + std::to_string(i)};
    for (size_t k = 0; k + 1 < r.turns.size(); ++k) {
      std::vector<int64_t> turn = r.turns[k];
      ASSERT_EQ(turn.back(), world().im_end) << "a turn the episode went on after ended with <|im_end|>";
      turn.pop_back();
      conversation.push_back({ChatRole::assistant, decode_with_specials(turn)});
      conversation.push_back({ChatRole::user, replies.at(k)});
    }
    const std::string want = world().tmpl.render_text(conversation, true) + decode_with_specials(r.turns.back());
    EXPECT_EQ(decode_with_specials(r.ids), want);
    // Replies sit between turns; nothing after the last turn.
    EXPECT_EQ(r.replies.size(), r.turns.size() - 1);
    const bool finished = r.turns.size() == 3 || r.turns.back().back() != world().im_end;
    EXPECT_TRUE(finished);
    if (r.turns.back().back() == world().im_end) {  // a complete last turn: the environment ended it
      EXPECT_TRUE(e.ended[i].item<bool>());
      EXPECT_EQ(e.env_rewards[i].item<float>(), static_cast<float>(i));
    } else {
      EXPECT_FALSE(e.ended[i].item<bool>());
      EXPECT_EQ(e.env_rewards[i].item<float>(), 0.0F);  // `end` answered {"reward": 0}
    }
  }
  EXPECT_GE(multi_turn, 3) << "too few episodes went past one turn to test anything";
  EXPECT_EQ(run.tally.episodes, 6);
}

TEST(EpisodeRunner, ToolRepliesContinueAsQwenWritesToolResults) {
  const Tokenizer& t = *world().tokenizer;
  auto tool = [](const std::string& content) {
    ChatMessage m{ChatRole::tool, content};
    m.fields["name"] = "calculator";
    return m;
  };
  const std::vector<int64_t> ends{world().im_end};
  EXPECT_EQ(turn_continuation_ids(world().tmpl, t, {tool("42")}, {}, ends),
            t.encode_with_control_pieces("\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n"
                                         "<|im_start|>assistant\n"));
  EXPECT_EQ(turn_continuation_ids(world().tmpl, t, {tool("1"), tool("two")}, {}, ends),
            t.encode_with_control_pieces("\n<|im_start|>user\n<tool_response>\n1\n</tool_response>\n<tool_response>\n"
                                         "two\n</tool_response><|im_end|>\n<|im_start|>assistant\n"));
  EXPECT_EQ(turn_continuation_ids(world().tmpl, t, {{ChatRole::user, "higher"}}, {}, ends),
            t.encode_with_control_pieces("\n<|im_start|>user\nhigher<|im_end|>\n<|im_start|>assistant\n"));
}

TEST(EpisodeRunner, ScoringAndGaeEqualANaiveLoopOverEachEpisode) {
  // Tool results of several lengths after each turn; three turns at most. Episodes 0-2 and 3-5 share
  // their prompt, so scoring packs each group into one forward (shared_prompt_pack.h).
  std::vector<Json> envs;
  for (int i = 0; i < 6; ++i) {
    auto result = [&](int turn) {
      return Json{{"messages", Json::array({{{"role", "tool"}, {"name", "f"}, {"content", std::string(static_cast<size_t>(1 + (i + turn) % 4) * 3, 'x')}}})}};
    };
    envs.push_back({{"steps", Json::array({result(1), result(2)})}, {"reward", 0.5 * i}});
  }
  const std::vector<RolloutPrompt> prompts = write_prompts("score", envs, 3);
  EpisodesRun run = run_episodes(prompts, 2, {.max_turns = 3, .max_total_tokens = 200});
  Experience& e = run.experience;
  const ModelShape shape = world().model->config();
  CausalLM reference(shape);
  ScoreModel critic(shape);
  init_model_weights(*reference, shape, 0.2, 31);
  init_model_weights(*critic, shape, 0.2, 32);
  auto engine = offload::make_parameter_engine(offload::EngineOptions{});
  engine->add_model("policy", offload::group_parameters(*world().model, false), false);
  engine->add_model("reference", offload::group_parameters(*reference, false), false);
  engine->add_model("critic", offload::group_parameters(*critic, false), false);
  RolloutModels models;
  models.policy = world().model.get();
  models.reference = reference.get();
  models.critic = critic.get();
  ExperienceOptions options;
  options.micro_batch_size = 3;
  options.pad_id = 0;
  options.share_prompts = true;
  options.generate = turn_options(10);
  ExperienceMaker maker(*engine, models, options, *world().tokenizer);
  maker.score(e);
  e.scores = e.env_rewards;
  PpoConfig settings;
  settings.whiten_advantages = false;
  settings.gamma = 0.9;
  settings.lam = 0.8;
  const torch::Tensor kl = estimate_advantages(e, settings, 0.1);

  torch::NoGradGuard no_grad;
  int holes = 0;
  for (int64_t i = 0; i < e.rows(); ++i) {
    SCOPED_TRACE("episode " + std::to_string(i));
    const Row r = row_of(e, i);
    holes += r.replies.empty() ? 0 : 1;
    // The episode alone, no padding: columns of its policy tokens within the response.
    const int64_t lp = static_cast<int64_t>(prompts[static_cast<size_t>(i)].ids.size());
    const torch::Tensor ids = torch::tensor(r.ids, torch::kLong).unsqueeze(0);
    const torch::Tensor logp = torch::log_softmax(world().model->forward(ids).to(torch::kFloat), -1).squeeze(0);
    const torch::Tensor ref_logp = torch::log_softmax(reference->forward(ids).to(torch::kFloat), -1).squeeze(0);
    const torch::Tensor values = critic->forward(ids).to(torch::kFloat).squeeze(0);
    std::vector<int64_t> columns;  // response positions (0-based) of the policy's tokens
    for (int64_t c = 0; c < e.response_length(); ++c) {
      if (e.response_mask[i][c].item<float>() > 0) columns.push_back(c);
    }
    ASSERT_FALSE(columns.empty());
    std::vector<double> lp_want, kl_want, v_want;
    for (int64_t c : columns) {
      const int64_t at = lp + c;  // the token's index in the episode alone
      lp_want.push_back(logp[at - 1][r.ids[static_cast<size_t>(at)]].item<double>());
      kl_want.push_back(lp_want.back() - ref_logp[at - 1][r.ids[static_cast<size_t>(at)]].item<double>());
      v_want.push_back(values[at - 1].item<double>());
    }
    // Token rewards: -0.1 KL, plus the score on the last policy token; GAE over policy tokens only.
    const size_t n = columns.size();
    std::vector<double> adv(n), reward(n);
    for (size_t k = 0; k < n; ++k) reward[k] = -0.1 * kl_want[k] + (k + 1 == n ? e.scores[i].item<double>() : 0.0);
    double next_adv = 0, next_value = 0;
    for (size_t k = n; k-- > 0;) {
      const double delta = reward[k] + 0.9 * next_value - v_want[k];
      adv[k] = delta + 0.9 * 0.8 * next_adv;
      next_adv = adv[k];
      next_value = v_want[k];
    }
    for (size_t k = 0; k < n; ++k) {
      const int64_t c = columns[k];
      EXPECT_NEAR(e.logprobs[i][c].item<double>(), lp_want[k], 1e-4) << "position " << c;
      EXPECT_NEAR(kl[i][c].item<double>(), kl_want[k], 1e-4) << "position " << c;
      EXPECT_NEAR(e.values[i][c].item<double>(), v_want[k], 1e-4) << "position " << c;
      EXPECT_NEAR(e.advantages[i][c].item<double>(), adv[k], 1e-4) << "position " << c;
      EXPECT_NEAR(e.returns[i][c].item<double>(), adv[k] + v_want[k], 1e-4) << "position " << c;
    }
    // Environment tokens and padding carry nothing.
    const torch::Tensor off = 1 - e.response_mask[i];
    for (const torch::Tensor* t : std::initializer_list<const torch::Tensor*>{&e.logprobs, &kl, &e.values, &e.advantages, &e.returns}) {
      EXPECT_EQ(((*t)[i] * off).abs().sum().item<double>(), 0.0);
    }
  }
  EXPECT_GE(holes, 2) << "too few episodes had a tool reply between turns";
}

TEST(EpisodeRunner, AnEpisodesTokensDoNotDependOnItsBatch) {
  std::vector<Json> quick, slow;
  for (int i = 0; i < 6; ++i) {
    const Json steps = Json::array({{{"messages", Json::array({user("go on")})}}, {{"messages", Json::array({user("more")})}}});
    quick.push_back({{"steps", steps}});
    slow.push_back({{"steps", steps}, {"sleep_ms", 30 * (i % 3)}});
  }
  const EpisodeSettings settings{.max_turns = 3, .max_total_tokens = 120};
  const EpisodesRun together = run_episodes(write_prompts("quick", quick), 2, settings);
  const EpisodesRun staggered = run_episodes(write_prompts("slow", slow), 3, settings);
  const std::vector<RolloutPrompt> all = write_prompts("alone", quick);
  for (int64_t i = 0; i < 6; ++i) {
    SCOPED_TRACE("episode " + std::to_string(i));
    // Alone: the same row generator (row i of rollout 0) for a one-episode run.
    EnvironmentPool pool(kScripted, 1, 20);
    std::ostringstream log;
    EpisodeRunner runner(pool, *world().tokenizer, world().tmpl, settings, log);
    std::vector<at::Generator> generator = rollout_row_generators(7, 0, i, 1);
    EpisodeTally tally;
    const Experience alone = runner.run(*world().model, turn_options(10), {&all[static_cast<size_t>(i)]}, generator, 0, tally);
    const Row want = row_of(alone, 0);
    EXPECT_EQ(row_of(together.experience, i).ids, want.ids);
    EXPECT_EQ(row_of(staggered.experience, i).ids, want.ids);
    EXPECT_EQ(row_of(staggered.experience, i).turns, want.turns);
  }
}

TEST(EpisodeRunner, LimitsAndFaultsEndEpisodesAsDocumented) {
  const fs::path log = scratch() / "limits.log";
  std::vector<Json> envs;
  const Json forever = Json::array({{{"messages", Json::array({user("more")})}}, {{"messages", Json::array({user("more")})}},
                                    {{"messages", Json::array({user("more")})}}});
  envs.push_back({{"steps", forever}, {"end_reward", 0.25}, {"log", log.string()}});  // max_turns ends it
  envs.push_back({{"steps", forever}, {"fault", {{"step1", "crash"}}}});
  envs.push_back({{"steps", forever}, {"fault", {{"reset", "garbage"}}}});
  const EpisodesRun run = run_episodes(write_prompts("limits", envs), 3, {.max_turns = 2, .max_total_tokens = 400}, 10, 20);
  const Experience& e = run.experience;
  // Episode 0: two turns, then `end` (reason max_turns), whose reward counts; or a truncated turn.
  std::vector<Json> requests;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) requests.push_back(Json::parse(line));
  ASSERT_GE(requests.size(), 2u);
  EXPECT_EQ(requests.front()["type"], "reset");
  EXPECT_EQ(requests.back()["type"], "end");
  const Row r0 = row_of(e, 0);
  if (r0.turns.size() == 2 && r0.turns.back().back() == world().im_end) {
    EXPECT_EQ(requests.back()["reason"], "max_turns");
    EXPECT_TRUE(e.ended[0].item<bool>());
    EXPECT_EQ(run.tally.max_turns, 1);
  } else {
    EXPECT_NE(requests.back()["reason"], "max_turns");
  }
  EXPECT_EQ(e.env_rewards[0].item<float>(), 0.25F);
  EXPECT_LE(r0.turns.size(), 2u);
  // A crash and a garbage answer: NaN rewards (left out of learning), counted.
  EXPECT_TRUE(std::isnan(e.env_rewards[1].item<float>()));
  EXPECT_TRUE(std::isnan(e.env_rewards[2].item<float>()));
  EXPECT_EQ(run.tally.crash + run.tally.malformed, 2);
  EXPECT_EQ(run.tally.malformed, 1);
  // The garbage reset left the prompt as it was, and no turn was generated for it.
  EXPECT_EQ(e.response_mask[2].sum().item<float>(), 0.0F);

  // A budget of a few tokens cuts the first turn: `end` with reason max_total_tokens.
  const fs::path small_log = scratch() / "small.log";
  const EpisodesRun small = run_episodes(write_prompts("small", {{{"steps", forever}, {"log", small_log.string()}}}), 1,
                                 {.max_turns = 4, .max_total_tokens = 3}, 10, 20);
  EXPECT_LE(small.experience.response_mask.sum().item<float>(), 3.0F);
  std::ifstream small_in(small_log);
  std::string last;
  for (std::string line; std::getline(small_in, line);) last = line;
  const Json end = Json::parse(last);
  EXPECT_EQ(end["type"], "end");
  if (row_of(small.experience, 0).turns.front().back() != world().im_end) {
    EXPECT_EQ(end["reason"], "max_total_tokens");
    EXPECT_EQ(small.tally.truncated, 1);
  }
}

TEST(EpisodeRunner, EpisodesAtDifferentLengthsShareAModelWithFewPositions) {
  // A model with 28 positions past the prompt: an episode far into its conversation and one at
  // its start cannot share a left-padded batch with their budgets. The runner groups them by
  // length; each keeps the tokens it gets alone, and none passes the positions.
  const int64_t prompt_length = static_cast<int64_t>(
      world().tmpl.render_prompt({{ChatRole::user, "Q0"}}, *world().tokenizer).size());
  const int64_t positions = prompt_length + 28;
  static World short_world(positions);
  std::vector<Json> envs;
  for (int i = 0; i < 6; ++i) {
    envs.push_back({{"steps", Json::array({{{"messages", Json::array({user("on")})}}, {{"messages", Json::array({user("go")})}}})},
                    {"sleep_ms", 40 * (i % 3)}});
  }
  const EpisodeSettings settings{.max_turns = 3, .max_total_tokens = 60};
  std::ostringstream log;
  const std::vector<RolloutPrompt> prompts = [&] {
    const fs::path path = scratch() / "short.jsonl";
    std::ofstream out(path);
    for (size_t i = 0; i < envs.size(); ++i) {
      out << Json{{"messages", Json::array({user("Q" + std::to_string(i))})}, {"env", envs[i]}}.dump() << "\n";
    }
    out.close();
    return PromptFile(path.string(), *short_world.tokenizer, short_world.tmpl, {}, log).load_all();
  }();
  const EpisodesRun together = run_episodes(prompts, 3, settings, 10, 20, short_world);
  EXPECT_GE(together.tally.turns, 9) << "too few turns to reach the positions' end";
  for (int64_t i = 0; i < 6; ++i) {
    SCOPED_TRACE("episode " + std::to_string(i));
    const Row got = row_of(together.experience, i);
    EXPECT_LE(static_cast<int64_t>(got.ids.size()), positions);
    const EpisodesRun alone = run_episodes({prompts[static_cast<size_t>(i)]}, 1, settings, 10, 20, short_world, i);
    EXPECT_EQ(got.ids, row_of(alone.experience, 0).ids);
  }
}

}  // namespace
}  // namespace ferry::rl
