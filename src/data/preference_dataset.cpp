// Loading and tokenising preference pairs (see preference_dataset.h).
#include "src/data/preference_dataset.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/error.h"
#include "core/text.h"
#include "src/data/conversation_json.h"
#include "src/data/data_file.h"
#include "src/tokenizer/chat_template.h"

namespace ferry {
bool empty_response(const Conversation& response) {
  return response.empty() || trim(response.back().content).empty();
}

Conversation messages_or_text(const nlohmann::ordered_json& object, const std::string& key, ChatRole role) {
  const auto it = object.find(key);
  if (it != object.end() && it->is_string()) return {{role, it->get<std::string>()}};
  return conversation_from_json(object, key);
}

std::string PreferenceDatasetStats::summary() const {
  std::string s = std::to_string(pairs) + " pairs, " + std::to_string(truncated) + " with a truncated response";
  s += "; bad pairs skipped: " + std::to_string(empty_response) +
       " empty response, " + std::to_string(identical) + " chosen identical to rejected, " + std::to_string(no_room) +
       " prompt leaving no room under data.max_length";
  if (jsonl.skipped > 0) {
    s += "; " + std::to_string(jsonl.skipped) + " malformed lines skipped (first: " + jsonl.first_skipped_error + ")";
  }
  if (prompt_diverged > 0) {
    s += "; " + std::to_string(prompt_diverged) + " pairs whose prompt the chat template renders differently once "
         "answered: trained from where the ids part, as TRL does (the end of the prompt counts as response)";
  }
  return s;
}

bool PreferenceMessages::chosen_empty() const {
  return trl && !trl_chosen.conversational ? trim(trl_chosen.text).empty() : empty_response(chosen);
}

bool PreferenceMessages::rejected_empty() const {
  return trl && !trl_rejected.conversational ? trim(trl_rejected.text).empty() : empty_response(rejected);
}

bool PreferenceMessages::identical() const {
  return trl && !trl_chosen.conversational ? trl_chosen.text == trl_rejected.text : chosen == rejected;
}

PreferenceMessages preference_messages_from_json(const nlohmann::ordered_json& object) {
  PreferenceMessages out;
  if (!object.contains("chosen") || !object.contains("rejected")) {
    throw InputError("a preference pair needs \"chosen\" and \"rejected\", with \"prompt\" (TRL; or the prompt "
                     "left inside both) or \"context\" (ColossalChat); docs/data.md lists the formats");
  }
  out.context = chat_context_from_json(object);
  if (object.contains("context")) {
    out.prompt = conversation_from_json(object, "context");
    out.chosen = messages_or_text(object, "chosen", ChatRole::assistant);
    out.rejected = messages_or_text(object, "rejected", ChatRole::assistant);
  } else {
    // TRL's maybe_extract_prompt: a prompt of the other kind than the responses is ignored.
    const nlohmann::ordered_json& chosen = object.at("chosen");
    const bool conversational = chosen.is_array();
    out.trl = true;
    out.trl_chosen = trl_field(object, "chosen", conversational);
    out.trl_rejected = trl_field(object, "rejected", conversational);
    const auto prompt = object.find("prompt");
    if (prompt != object.end() && prompt->is_array() == conversational) {
      out.trl_prompt = trl_field(object, "prompt", conversational);
    } else {
      out.trl_prompt = extract_prompt(out.trl_chosen, out.trl_rejected);
    }
    out.prompt = out.trl_prompt.messages;
    out.chosen = out.trl_chosen.messages;
    out.rejected = out.trl_rejected.messages;
  }
  if (const auto margin = object.find("margin"); margin != object.end()) {
    if (!margin->is_number()) throw InputError("field \"margin\" must be a number");
    out.margin = margin->get<double>();
  }
  return out;
}

std::optional<TokenizedSample> tokenize_response(const Conversation& prompt, const Conversation& response,
                                                 const ChatContext& context, const Tokenizer& tokenizer,
                                                 const ChatTemplate& chat_template, int64_t max_length,
                                                 bool* truncated) {
  Conversation whole = prompt;
  whole.insert(whole.end(), response.begin(), response.end());
  TokenizedConversation t = chat_template.apply(whole, tokenizer, context);  // checks the order of the messages
  // Only the response is trained: earlier rounds, and the tokens the prompt rendered with a generation
  // prompt shares with prompt + response (TRL's split; a tool call inside the prompt's round), belong
  // to the prompt.
  size_t prompt_end = t.round_ends.size() >= 2 ? t.round_ends[t.round_ends.size() - 2] : 0;
  const std::vector<int64_t> prompt_ids = chat_template.render_prompt(prompt, tokenizer, context);
  size_t shared = 0;
  while (shared < prompt_ids.size() && shared < t.ids.size() && prompt_ids[shared] == t.ids[shared]) ++shared;
  prompt_end = std::max(prompt_end, shared);
  std::fill(t.loss_mask.begin(), t.loss_mask.begin() + static_cast<std::ptrdiff_t>(prompt_end), uint8_t{0});
  const auto first_trained = std::find(t.loss_mask.begin(), t.loss_mask.end(), uint8_t{1});
  if (first_trained == t.loss_mask.end()) {
    throw InputError("chat template '" + chat_template.name + "' (" + chat_template.source + ") leaves no token of "
                     "the response to train on: it renders the prompt differently once it is answered");
  }
  const int64_t prompt_tokens = first_trained - t.loss_mask.begin();
  if (prompt_tokens >= max_length) return std::nullopt;
  const bool cut = static_cast<int64_t>(t.ids.size()) > max_length;
  if (cut) {
    t.ids.resize(static_cast<size_t>(max_length));
    t.loss_mask.resize(static_cast<size_t>(max_length));
  }
  if (truncated != nullptr) *truncated = cut;
  return TokenizedSample{std::move(t.ids), std::move(t.loss_mask), 0};
}

PairSamples tokenize_pair(const PreferenceMessages& pair, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                          int64_t max_length) {
  PairSamples out;
  if (!pair.trl) {
    out.chosen = tokenize_response(pair.prompt, pair.chosen, pair.context, tokenizer, chat_template, max_length,
                                   &out.chosen_cut);
    out.rejected = tokenize_response(pair.prompt, pair.rejected, pair.context, tokenizer, chat_template, max_length,
                                     &out.rejected_cut);
    return out;
  }
  TrlField chosen = pair.trl_chosen, rejected = pair.trl_rejected;
  if (!chosen.conversational) {  // TRL's add_eos
    chosen.text = with_eos_text(chosen.text, tokenizer);
    rejected.text = with_eos_text(rejected.text, tokenizer);
  }
  const std::vector<int64_t> prompt_ids = trl_prompt_ids(pair.trl_prompt, pair.context, tokenizer, chat_template);
  std::vector<int64_t> chosen_ids = trl_sequence_ids(pair.trl_prompt, chosen, pair.context, tokenizer, chat_template);
  std::vector<int64_t> rejected_ids =
      trl_sequence_ids(pair.trl_prompt, rejected, pair.context, tokenizer, chat_template);
  const size_t prompt_length =
      std::min(common_prefix_length(prompt_ids, chosen_ids), common_prefix_length(prompt_ids, rejected_ids));
  out.prompt_diverged = prompt_length < prompt_ids.size();
  out.chosen = trl_completion_sample(std::move(chosen_ids), prompt_length, max_length, 0, &out.chosen_cut);
  out.rejected = trl_completion_sample(std::move(rejected_ids), prompt_length, max_length, 0, &out.rejected_cut);
  return out;
}

PreferenceDataset load_preference_dataset(const std::string& path, const Tokenizer& tokenizer,
                                          const ChatTemplate& chat_template, int64_t max_length, bool skip_bad_lines,
                                          int64_t max_samples, const RowFormat& format) {
  PreferenceDataset dataset;
  auto& stats = dataset.stats;
  // A bad pair is counted under its reason when skipped, or stops the run (read_jsonl adds file:line).
  auto bad_pair = [&](int64_t& counter, const std::string& what) {
    if (!skip_bad_lines) throw InputError(what + " (fix or remove the pair, or set data.skip_bad_lines: true)");
    ++counter;
  };
  const DataFile file = DataFile::open(path);
  stats.jsonl = file.for_each(skip_bad_lines, [&](int64_t line, uint64_t, const nlohmann::ordered_json& row) {
    if (max_samples > 0 && static_cast<int64_t>(dataset.pairs.size()) >= max_samples) return;
    const PreferenceMessages messages = preference_messages_from_json(normalize_row(row, format));
    if (messages.chosen_empty() || messages.rejected_empty()) {
      return bad_pair(stats.empty_response,
                      std::string("bad pair: the ") + (messages.chosen_empty() ? "chosen" : "rejected") +
                          " response is empty");
    }
    if (messages.identical()) {
      return bad_pair(stats.identical, "bad pair: chosen and rejected are identical, so there is nothing to prefer");
    }
    PairSamples samples = tokenize_pair(messages, tokenizer, chat_template, max_length);
    auto& chosen = samples.chosen;
    auto& rejected = samples.rejected;
    const bool chosen_cut = samples.chosen_cut, rejected_cut = samples.rejected_cut;
    if (!chosen || !rejected) {
      return bad_pair(stats.no_room, "bad pair: the prompt alone fills data.max_length (" + std::to_string(max_length) +
                                         " tokens), leaving no room for a response; raise data.max_length");
    }
    if (chosen_cut || rejected_cut) ++stats.truncated;
    if (samples.prompt_diverged) ++stats.prompt_diverged;
    PreferencePair pair{std::move(*chosen), std::move(*rejected), messages.margin, {}, {}};
    pair.chosen.line = pair.rejected.line = line;
    dataset.pairs.push_back(std::move(pair));
  });
  stats.pairs = static_cast<int64_t>(dataset.pairs.size());
  return dataset;
}

}  // namespace ferry
