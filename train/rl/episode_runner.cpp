// Multi-turn episodes against an environment (see episode_runner.h).
#include "train/rl/episode_runner.h"

#include <torch/types.h>

#include <algorithm>
#include <initializer_list>
#include <cmath>
#include <limits>
#include <utility>

#include "core/error.h"
#include "src/data/conversation_json.h"
#include "src/generate/prompt_batch.h"
#include "src/generate/stop_strings.h"
#include "src/generate/tool_call_parser.h"
#include "src/metrics/metrics_clock.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/turn_continuation.h"
#include "train/rl/environment_pool.h"

namespace ferry::rl {

using Json = nlohmann::ordered_json;

struct EpisodeRunner::Episode {
  enum class State { resetting, ready, waiting, ending, finished };
  const RolloutPrompt* prompt = nullptr;
  int64_t id = 0;
  size_t row = 0;
  State state = State::resetting;
  Conversation conversation;  // the prompt's messages, as the reset left them
  ChatContext context;
  std::vector<int64_t> prompt_ids;
  std::vector<int64_t> tokens;   // after the prompt: turns and continuations
  std::vector<uint8_t> policy;   // 1 where the policy sampled tokens[i]
  int64_t turns = 0;
  double reward = 0;
  bool faulted = false;
  bool complete = false;  // ended by the environment or by max_turns, not by a budget or a fault
  bool at_max_turns = false;  // Ferry ended it at rollout.max_turns
  std::string last_answer;
};

namespace {

// Keys an answer may have; anything else is a typo the environment should hear about.
bool check_keys(const Json& body, std::initializer_list<const char*> allowed, std::string& error) {
  for (const auto& item : body.items()) {
    if (item.key() == "episode" || item.key() == "info") continue;
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* k) { return item.key() == k; })) {
      std::string expected;
      for (const char* k : allowed) expected += (expected.empty() ? "" : ", ") + std::string(k);
      error = "unknown key '" + item.key() + "' (an answer may have " + expected + ", info)";
      return false;
    }
  }
  return true;
}

// The answer's "reward", if any; false with `error` when it is not a number.
bool read_reward(const Json& body, double& reward, std::string& error) {
  const auto r = body.find("reward");
  if (r == body.end() || r->is_null()) return true;
  if (!r->is_number()) {
    error = "\"reward\" must be a number, got " + r->dump();
    return false;
  }
  reward += r->get<double>();
  return true;
}

Conversation messages_of(const Json& body) {
  const auto m = body.find("messages");
  if (m == body.end() || m->is_null()) return {};
  if (!m->is_array()) throw InputError("\"messages\" must be a list of {\"role\", \"content\"} objects");
  return conversation_from_json(Json{{"messages", *m}}, "messages");
}

}  // namespace

EpisodeRunner::EpisodeRunner(EnvironmentPool& pool, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                             EpisodeSettings settings, std::ostream& log, TurnGenerator generate_turns)
    : pool_(pool),
      tokenizer_(tokenizer),
      chat_template_(chat_template),
      settings_(settings),
      log_(log),
      generate_turns_(std::move(generate_turns)) {
  FERRY_CHECK(settings_.tool_call_format != ToolCallFormat::auto_, "EpisodeRunner: resolve tool_call_format first");
  FERRY_CHECK(static_cast<bool>(generate_turns_), "EpisodeRunner: no turn generator");
}

void EpisodeRunner::note(const std::string& kind, const std::string& message) {
  if (std::find(noted_.begin(), noted_.end(), kind) != noted_.end()) return;
  noted_.push_back(kind);
  log_ << "note: rollout.environment `" << pool_.command() << "`: " << message
       << " (the episode ended; later ones like it are only counted in the metrics)\n";
}

void EpisodeRunner::finish(Episode& e) {
  e.state = Episode::State::finished;
  pool_.close(e.id);
}

Experience EpisodeRunner::run(CausalLMImpl& policy, const GenerateOptions& options,
                              const std::vector<const RolloutPrompt*>& prompts,
                              std::vector<at::Generator>& row_generators, int64_t pad_id, EpisodeTally& tally) {
  FERRY_CHECK(row_generators.empty() || row_generators.size() == prompts.size(), "EpisodeRunner: ",
              row_generators.size(), " generators for ", prompts.size(), " prompts");
  std::vector<Episode> episodes(prompts.size());
  std::map<int64_t, size_t> by_id;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!prompts[i]->conversational) {
      throw InputError(detail::concat("data.prompt_file row ", prompts[i]->line, ": a multi-turn episode continues a "
                                      "conversation, and this prompt is text (TRL's standard prompt); give it as "
                                      "messages: {\"prompt\": [{\"role\": \"user\", \"content\": ...}]}"));
    }
    Episode& e = episodes[i];
    e.prompt = prompts[i];
    e.id = next_episode_++;
    e.row = i;
    e.conversation = prompts[i]->conversation;
    e.context = prompts[i]->context;
    by_id[e.id] = i;
    Json prompt = Json::parse(prompts[i]->source, nullptr, false);
    pool_.send(e.id, Json{{"type", "reset"}, {"prompt", prompt.is_discarded() ? Json(prompts[i]->text) : prompt}});
  }
  tally.episodes += static_cast<int64_t>(episodes.size());
  positions_ = policy.config().max_position_embeddings;
  end_ids_ = options.eos_token_ids;
  end_ids_.insert(end_ids_.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());
  while (true) {
    std::vector<size_t> ready;
    int64_t waiting = 0;
    for (size_t i = 0; i < episodes.size(); ++i) {
      const Episode::State s = episodes[i].state;
      if (s == Episode::State::ready) ready.push_back(i);
      if (s == Episode::State::resetting || s == Episode::State::waiting || s == Episode::State::ending) ++waiting;
    }
    // Generate the ready episodes when nothing else is coming, when the answers still due would
    // take longer (at the environments' mean answer time) than a turn takes to generate, or when
    // an environment is slower than usual; else wait for the answers and generate all together.
    const bool due_later = turn_seconds_ >= 0 && pool_.drain_seconds() >= turn_seconds_;
    if (!ready.empty() && (waiting == 0 || due_later || pool_.overdue())) {
      generate_turn(policy, options, episodes, ready, row_generators, pad_id, tally);
      continue;
    }
    if (waiting == 0) break;
    const double started = monotonic_seconds();
    const std::vector<EnvReply> replies = pool_.poll(ready.empty() ? 1000 : 20);
    if (ready.empty()) tally.env_wait_seconds += monotonic_seconds() - started;
    for (const EnvReply& reply : replies) {
      const auto found = by_id.find(reply.episode);
      FERRY_CHECK(found != by_id.end(), "environment answer for an unknown episode ", reply.episode);
      ++tally.env_requests;
      tally.env_answer_seconds += reply.seconds;
      on_reply(episodes[found->second], reply, tally);
    }
  }

  // The Experience layout: left-padded prompts, then each episode's tokens.
  const int64_t rows = static_cast<int64_t>(episodes.size());
  int64_t p = 1, r = 1;
  for (const Episode& e : episodes) {
    p = std::max<int64_t>(p, static_cast<int64_t>(e.prompt_ids.size()));
    r = std::max<int64_t>(r, static_cast<int64_t>(e.tokens.size()));
  }
  Experience out;
  out.prompt_length = p;
  out.sequences = torch::full({rows, p + r}, pad_id, torch::kLong);
  out.attention_mask = torch::zeros({rows, p + r}, torch::kLong);
  out.response_mask = torch::zeros({rows, r}, torch::kFloat);
  out.ended = torch::zeros({rows}, torch::kBool);
  out.env_rewards = torch::zeros({rows}, torch::kFloat);
  auto seq = out.sequences.accessor<int64_t, 2>();
  auto att = out.attention_mask.accessor<int64_t, 2>();
  auto resp = out.response_mask.accessor<float, 2>();
  for (int64_t i = 0; i < rows; ++i) {
    const Episode& e = episodes[static_cast<size_t>(i)];
    const int64_t offset = p - static_cast<int64_t>(e.prompt_ids.size());
    for (size_t k = 0; k < e.prompt_ids.size(); ++k) {
      seq[i][offset + static_cast<int64_t>(k)] = e.prompt_ids[k];
      att[i][offset + static_cast<int64_t>(k)] = 1;
    }
    for (size_t k = 0; k < e.tokens.size(); ++k) {
      seq[i][p + static_cast<int64_t>(k)] = e.tokens[k];
      att[i][p + static_cast<int64_t>(k)] = 1;
      resp[i][static_cast<int64_t>(k)] = e.policy[k] ? 1.0F : 0.0F;
    }
    out.ended[i] = e.complete;
    out.env_rewards[i] = e.faulted ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(e.reward);
    out.responses.push_back(e.last_answer);
    tally.tokens += static_cast<int64_t>(e.tokens.size());
    tally.policy_tokens += std::count(e.policy.begin(), e.policy.end(), uint8_t{1});
  }
  return out;
}

void EpisodeRunner::generate_turn(CausalLMImpl& policy, const GenerateOptions& options,
                                  std::vector<Episode>& episodes, const std::vector<size_t>& ready,
                                  std::vector<at::Generator>& row_generators, int64_t pad_id, EpisodeTally& tally) {
  // Left padding makes a batch need its longest context plus its largest budget in positions; each
  // episode alone fits (its budget is bounded by the positions left), so episodes are grouped,
  // longest context first, into batches that fit. Generation is batch-invariant: the grouping
  // changes no token.
  auto context_length = [&](size_t i) {
    return static_cast<int64_t>(episodes[i].prompt_ids.size() + episodes[i].tokens.size());
  };
  std::vector<size_t> order = ready;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return context_length(a) > context_length(b); });
  std::vector<size_t> group;
  int64_t longest = 0, largest = 0;
  for (size_t i : order) {
    const int64_t context = context_length(i), budget = turn_budget(episodes[i], options);
    if (!group.empty() && std::max(longest, context) + std::max(largest, budget) > positions_) {
      generate_batch(policy, options, episodes, group, row_generators, pad_id, tally);
      group.clear();
      longest = largest = 0;
    }
    group.push_back(i);
    longest = std::max(longest, context);
    largest = std::max(largest, budget);
  }
  if (!group.empty()) generate_batch(policy, options, episodes, group, row_generators, pad_id, tally);
}

int64_t EpisodeRunner::turn_budget(const Episode& e, const GenerateOptions& options) const {
  const auto used = static_cast<int64_t>(e.tokens.size());
  const int64_t room = positions_ - static_cast<int64_t>(e.prompt_ids.size()) - used;
  return std::max<int64_t>(std::min({options.max_new_tokens, settings_.max_total_tokens - used, room}), 1);
}

void EpisodeRunner::generate_batch(CausalLMImpl& policy, const GenerateOptions& options,
                                   std::vector<Episode>& episodes, const std::vector<size_t>& ready,
                                   std::vector<at::Generator>& row_generators, int64_t pad_id, EpisodeTally& tally) {
  std::vector<std::vector<int64_t>> contexts;
  std::vector<at::Generator> generators;
  std::vector<int64_t> budgets;
  int64_t most = 1;
  for (size_t i : ready) {
    const Episode& e = episodes[i];
    std::vector<int64_t> ids = e.prompt_ids;
    ids.insert(ids.end(), e.tokens.begin(), e.tokens.end());
    contexts.push_back(std::move(ids));
    if (!row_generators.empty()) generators.push_back(row_generators[e.row]);
    budgets.push_back(turn_budget(e, options));
    most = std::max(most, budgets.back());
  }
  GenerateOptions turn = options;
  turn.max_new_tokens = most;
  turn.row_generators = generators.empty() ? nullptr : &generators;
  const PromptBatch batch = left_pad(contexts, pad_id);
  const double started = monotonic_seconds();
  const bool environments_working = pool_.in_flight() > 0;
  GenerateResult result;
  {
    torch::NoGradGuard no_grad;
    result = generate_turns_(policy, batch.input_ids, batch.attention_mask, turn);
  }
  const double took = monotonic_seconds() - started;
  tally.generate_seconds += took;
  if (environments_working) tally.generate_overlap_seconds += took;
  turn_seconds_ = turn_seconds_ < 0 ? took : 0.7 * turn_seconds_ + 0.3 * took;
  const GenerateResult on_host{result.tokens.cpu().contiguous(), result.attention_mask.cpu().contiguous(),
                               result.logprobs.cpu(), result.prompt_length};
  const StopStrings stop_strings(options.stop_strings);
  for (size_t k = 0; k < ready.size(); ++k) {
    Episode& e = episodes[ready[k]];
    const int64_t row = static_cast<int64_t>(k);
    Completion completion = completion_of(on_host, row, tokenizer_, end_ids_, stop_strings);
    // The turn's tokens as sampled, the end-of-turn id included, cut to this episode's budget.
    const int64_t width = on_host.tokens.size(1) - on_host.prompt_length;
    const auto tokens = on_host.tokens.accessor<int64_t, 2>();
    const auto mask = on_host.attention_mask.accessor<int64_t, 2>();
    std::vector<int64_t> ids;
    for (int64_t t = on_host.prompt_length; t < on_host.prompt_length + width && mask[row][t] != 0; ++t) {
      ids.push_back(tokens[row][t]);
    }
    bool stopped = completion.stopped;
    if (static_cast<int64_t>(ids.size()) > budgets[k]) {
      ids.resize(static_cast<size_t>(budgets[k]));
      stopped = false;
      completion.text = tokenizer_.decode(ids);
    }
    e.tokens.insert(e.tokens.end(), ids.begin(), ids.end());
    e.policy.insert(e.policy.end(), ids.size(), uint8_t{1});
    ++e.turns;
    ++tally.turns;
    const ParsedAssistantTurn parsed = parse_tool_calls(completion.text, settings_.tool_call_format);
    tally.tool_calls += static_cast<int64_t>(parsed.tool_calls.size());
    tally.invalid_tool_calls += static_cast<int64_t>(parsed.invalid_tool_calls.size());
    e.last_answer = parsed.content;
    Json message{{"role", "assistant"}, {"content", parsed.content}};
    if (!parsed.tool_calls.empty()) message["tool_calls"] = parsed.tool_calls;
    Json request{{"message", message}, {"text", completion.text}};
    if (!parsed.invalid_tool_calls.empty()) request["invalid_tool_calls"] = parsed.invalid_tool_calls;
    if (!stopped) {
      ++tally.truncated;
      request["type"] = "end";
      request["reason"] = static_cast<int64_t>(e.tokens.size()) >= settings_.max_total_tokens ? "max_total_tokens"
                                                                                                : "max_new_tokens";
      e.state = Episode::State::ending;
    } else {
      request["type"] = "step";
      request["turn"] = e.turns;
      e.state = Episode::State::waiting;
    }
    pool_.send(e.id, std::move(request));
  }
}

void EpisodeRunner::on_reply(Episode& e, const EnvReply& reply, EpisodeTally& tally) {
  const Episode::State state = e.state;
  auto fault = [&](EnvFault kind, const std::string& error) {
    e.faulted = true;
    e.complete = false;
    switch (kind) {
      case EnvFault::crash: ++tally.crash; break;
      case EnvFault::timeout: ++tally.timeout; break;
      default: ++tally.malformed; break;
    }
    note(env_fault_name(kind), "episode of the prompt on line " + std::to_string(e.prompt->line) + ": " + error);
    if (e.prompt_ids.empty()) e.prompt_ids = e.prompt->ids;
    finish(e);
  };
  if (reply.fault != EnvFault::none) return fault(reply.fault, reply.error);
  const Json& body = reply.body;
  std::string error;
  if (state == Episode::State::resetting) {
    if (!check_keys(body, {"messages", "append", "tools", "reward"}, error) || !read_reward(body, e.reward, error)) {
      return fault(EnvFault::malformed, "reset: " + error);
    }
    try {
      Conversation added = messages_of(body);
      if (const auto a = body.find("append"); a != body.end() && !a->is_null()) {
        if (!a->is_string()) throw InputError("\"append\" must be a string");
        e.conversation.back().content += a->get<std::string>();
      }
      e.conversation.insert(e.conversation.end(), added.begin(), added.end());
      if (const auto t = body.find("tools"); t != body.end() && !t->is_null()) {
        if (!t->is_array()) throw InputError("\"tools\" must be a list of JSON-schema functions");
        e.context.tools = *t;
      }
      check_conversation(e.conversation, ConversationEnd::user);
      e.prompt_ids = chat_template_.render_prompt(e.conversation, tokenizer_, e.context);
      if (static_cast<int64_t>(e.prompt_ids.size()) >= positions_) {
        throw InputError(detail::concat("the prompt after reset has ", e.prompt_ids.size(),
                                        " tokens, no room left in the model's ", positions_, " positions"));
      }
    } catch (const InputError& ex) {
      return fault(EnvFault::malformed, std::string("reset: ") + ex.what());
    }
    e.state = Episode::State::ready;
    return;
  }
  if (state == Episode::State::ending) {
    if (!check_keys(body, {"reward", "done", "messages"}, error) || !read_reward(body, e.reward, error)) {
      return fault(EnvFault::malformed, "end: " + error);
    }
    if (e.at_max_turns) ++tally.max_turns;
    return finish(e);
  }
  FERRY_CHECK(state == Episode::State::waiting, "environment answer for an episode that asked nothing");
  if (!check_keys(body, {"messages", "done", "reward"}, error) || !read_reward(body, e.reward, error)) {
    return fault(EnvFault::malformed, "step: " + error);
  }
  const auto done = body.find("done");
  if (done != body.end() && !done->is_boolean()) return fault(EnvFault::malformed, "step: \"done\" must be true or false");
  if (done != body.end() && done->get<bool>()) {
    ++tally.done;
    e.complete = true;
    return finish(e);
  }
  if (e.turns >= settings_.max_turns) {  // the environment would go on; the episode may not
    e.complete = true;
    e.at_max_turns = true;
    e.state = Episode::State::ending;
    pool_.send(e.id, Json{{"type", "end"}, {"reason", "max_turns"}});
    return;
  }
  std::vector<int64_t> continuation;
  try {
    const Conversation reply_messages = messages_of(body);
    if (reply_messages.empty()) {
      throw InputError("a step answer needs \"messages\" (tool results or a user turn) or \"done\": true");
    }
    continuation = turn_continuation_ids(chat_template_, tokenizer_, reply_messages, e.context, end_ids_);
  } catch (const InputError& ex) {
    return fault(EnvFault::malformed, std::string("step: ") + ex.what());
  }
  const auto after = static_cast<int64_t>(e.tokens.size() + continuation.size());
  if (after >= settings_.max_total_tokens || static_cast<int64_t>(e.prompt_ids.size()) + after >= positions_) {
    ++tally.truncated;  // no room for the reply and an answer to it (in the budget or the model's positions)
    e.state = Episode::State::ending;
    pool_.send(e.id, Json{{"type", "end"}, {"reason", "max_total_tokens"}});
    return;
  }
  e.tokens.insert(e.tokens.end(), continuation.begin(), continuation.end());
  e.policy.insert(e.policy.end(), continuation.size(), uint8_t{0});
  e.state = Episode::State::ready;
}

}  // namespace ferry::rl
