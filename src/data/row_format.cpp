// Column renaming and the Alpaca / ShareGPT converters (see row_format.h).
#include "src/data/row_format.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/config/config.h"
#include "core/error.h"
#include "core/text.h"

namespace ferry {
namespace {

using Json = nlohmann::ordered_json;

Json message(const char* role, Json content) { return Json{{"role", role}, {"content", std::move(content)}}; }

std::string suggestion(const std::string& word, const std::vector<std::string>& names) {
  const std::string near = closest_match(word, names);
  return near.empty() ? std::string() : " (did you mean '" + near + "'?)";
}

// A field that must be a string when present (null and "" count as absent).
std::string optional_text(const Json& row, const char* key, const char* format) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return {};
  if (!it->is_string()) throw InputError(std::string(format) + " field \"" + key + "\" must be a string");
  return it->get<std::string>();
}

// A kto_tag (LLaMA-Factory's unpaired label): a boolean, when the row has one.
const Json* kto_tag(const Json& row) {
  const auto it = row.find("kto_tag");
  return it != row.end() && it->is_boolean() ? &*it : nullptr;
}

// LLaMA-Factory's tools column: a JSON list, or a string holding one.
void copy_tools(const Json& row, Json& out) {
  const auto it = row.find("tools");
  if (it == row.end() || it->is_null()) return;
  if (it->is_string()) {
    if (it->get<std::string>().empty()) return;
    try {
      out["tools"] = Json::parse(it->get<std::string>());
    } catch (const Json::exception& e) {
      throw InputError(std::string("field \"tools\" is a string that is not JSON: ") + e.what());
    }
  } else {
    out["tools"] = *it;
  }
}

// The converted row from a prompt (messages) and what follows it: a preference pair, an unpaired
// completion, a supervised answer (messages), or nothing (a prompt-only row).
Json assemble(Json prompt, const std::string& system, const Json& row, const Json* answer, const Json* chosen,
              const Json* rejected) {
  if (!system.empty()) prompt.insert(prompt.begin(), message("system", system));
  Json out = Json::object();
  if (chosen != nullptr && rejected != nullptr) {
    out["prompt"] = std::move(prompt);
    out["chosen"] = Json::array({*chosen});
    out["rejected"] = Json::array({*rejected});
  } else if (answer != nullptr && kto_tag(row) != nullptr) {
    out["prompt"] = std::move(prompt);
    out["completion"] = Json::array({*answer});
    out["label"] = *kto_tag(row);
  } else if (answer != nullptr) {
    prompt.push_back(*answer);
    out["messages"] = std::move(prompt);
  } else {
    out["prompt"] = std::move(prompt);
  }
  copy_tools(row, out);
  for (const char* keep : {"gt_answer", "kind", "margin"}) {
    if (const auto it = row.find(keep); it != row.end()) out[keep] = *it;
  }
  return out;
}

Json from_alpaca(const Json& row) {
  Json prompt = Json::array();
  if (const auto history = row.find("history"); history != row.end() && !history->is_null()) {
    if (!history->is_array()) throw InputError("Alpaca field \"history\" must be a list of [question, answer] pairs");
    for (size_t i = 0; i < history->size(); ++i) {
      const Json& pair = (*history)[i];
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
        throw InputError("Alpaca \"history\"[" + std::to_string(i) + "] must be a [question, answer] pair of strings");
      }
      prompt.push_back(message("user", pair[0]));
      prompt.push_back(message("assistant", pair[1]));
    }
  }
  std::string query = optional_text(row, "instruction", "Alpaca");
  const std::string input = optional_text(row, "input", "Alpaca");
  if (!input.empty()) query = query.empty() ? input : query + "\n" + input;
  prompt.push_back(message("user", query));
  const std::string system = optional_text(row, "system", "Alpaca");
  const auto chosen = row.find("chosen"), rejected = row.find("rejected");
  if (chosen != row.end() && rejected != row.end() && chosen->is_string() && rejected->is_string()) {
    const Json c = message("assistant", *chosen), r = message("assistant", *rejected);
    return assemble(std::move(prompt), system, row, nullptr, &c, &r);
  }
  if (const auto output = row.find("output"); output != row.end() && !output->is_null()) {
    if (!output->is_string()) throw InputError("Alpaca field \"output\" must be a string");
    const Json answer = message("assistant", *output);
    return assemble(std::move(prompt), system, row, &answer, nullptr, nullptr);
  }
  return assemble(std::move(prompt), system, row, nullptr, nullptr, nullptr);
}

// A function_call turn's value (a JSON object {"name", "arguments"} or a list of them, as text or
// JSON) as an assistant message with tool_calls.
Json function_call_message(const Json& value, const std::string& where) {
  Json calls = value;
  if (value.is_string()) {
    try {
      calls = Json::parse(value.get<std::string>());
    } catch (const Json::exception&) {
      throw InputError(where + ": a function_call turn's value must be JSON: {\"name\": ..., \"arguments\": {...}}");
    }
  }
  if (calls.is_object()) calls = Json::array({calls});
  if (!calls.is_array()) throw InputError(where + ": a function_call turn must hold a call or a list of calls");
  Json tool_calls = Json::array();
  for (const Json& call : calls) {
    if (!call.is_object() || !call.contains("name")) {
      throw InputError(where + ": each function call needs a \"name\" (and \"arguments\")");
    }
    tool_calls.push_back(Json{{"type", "function"},
                              {"function", {{"name", call["name"]}, {"arguments", call.value("arguments", Json::object())}}}});
  }
  return Json{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", std::move(tool_calls)}};
}

Json from_sharegpt(const Json& row, const ShareGptTags& tags) {
  const auto turns = row.find("conversations");
  if (turns == row.end() || !turns->is_array()) throw InputError("ShareGPT field \"conversations\" must be a list of turns");
  std::string system = optional_text(row, "system", "ShareGPT");
  Json aligned = Json::array();
  size_t first = 0;
  const auto tag_of = [&](const Json& turn, size_t i) -> std::string {
    const std::string where = "\"conversations\"[" + std::to_string(i) + "]";
    if (!turn.is_object()) throw InputError(where + " must be an object");
    const auto role = turn.find(tags.role);
    if (role == turn.end() || !role->is_string()) throw InputError(where + " needs a string \"" + tags.role + "\"");
    return role->get<std::string>();
  };
  const auto content_of = [&](const Json& turn, size_t i) -> Json {
    const auto content = turn.find(tags.content);
    if (content == turn.end() || !content->is_string()) {
      throw InputError("\"conversations\"[" + std::to_string(i) + "] needs a string \"" + tags.content + "\"");
    }
    return *content;
  };
  if (!turns->empty() && tag_of((*turns)[0], 0) == tags.system) {
    system = content_of((*turns)[0], 0).get<std::string>();
    first = 1;
  }
  // Turns alternate: user or observation, then assistant or function_call.
  const auto convert = [&](const Json& turn, size_t i, bool answer_turn) -> Json {
    const std::string tag = tag_of(turn, i);
    const std::string where = "\"conversations\"[" + std::to_string(i) + "]";
    // TRL's from/value rows keep the role names user, assistant and tool.
    if (answer_turn && (tag == tags.assistant || tag == "assistant")) return message("assistant", content_of(turn, i));
    if (answer_turn && tag == tags.function) return function_call_message(content_of(turn, i), where);
    if (!answer_turn && (tag == tags.user || tag == "user")) return message("user", content_of(turn, i));
    if (!answer_turn && (tag == tags.observation || tag == "tool")) return message("tool", content_of(turn, i));
    throw InputError(where + ": \"" + tag + "\" where " +
                     (answer_turn ? "an answer (\"" + tags.assistant + "\" or \"" + tags.function + "\")"
                                  : "a question (\"" + tags.user + "\" or \"" + tags.observation + "\")") +
                     " belongs (turns alternate; data.tags renames the tags)");
  };
  for (size_t i = first; i < turns->size(); ++i) aligned.push_back(convert((*turns)[i], i, (i - first) % 2 == 1));
  const auto chosen = row.find("chosen"), rejected = row.find("rejected");
  if (chosen != row.end() && rejected != row.end() && chosen->is_object() && rejected->is_object()) {
    if (aligned.size() % 2 == 0) {
      throw InputError("a ShareGPT preference row's \"conversations\" must end with a question (an odd number of turns)");
    }
    const Json c = convert(*chosen, aligned.size(), true), r = convert(*rejected, aligned.size(), true);
    return assemble(std::move(aligned), system, row, nullptr, &c, &r);
  }
  if (aligned.empty()) throw InputError("ShareGPT field \"conversations\" is empty");
  if (aligned.size() % 2 == 1) return assemble(std::move(aligned), system, row, nullptr, nullptr, nullptr);
  Json answer = aligned.back();
  aligned.erase(aligned.size() - 1);
  return assemble(std::move(aligned), system, row, &answer, nullptr, nullptr);
}

}  // namespace

const std::vector<std::string>& row_field_names() {
  static const std::vector<std::string> names = {
      "messages", "conversations", "text",   "prompt",  "completion", "chosen", "rejected", "label",
      "context",  "instruction",   "input",  "output",  "system",     "history", "tools",   "documents",
      "gt_answer", "kind",         "margin", "kto_tag"};
  return names;
}

RowFormat RowFormat::from_config(const DataConfig& data) {
  RowFormat out;
  out.format = data.format;
  const auto read_map = [](const std::string& text, const std::string& key) {
    const Json map = Json::parse(text);
    std::map<std::string, std::string> out;
    for (const auto& [name, value] : map.items()) {
      if (!value.is_string()) {
        throw ConfigError("data." + key + "." + name + ": expected a column name (a string), got " + value.dump());
      }
      out[name] = value.get<std::string>();
    }
    return out;
  };
  for (const auto& [field, column] : read_map(data.columns.json, "columns")) {
    const auto& names = row_field_names();
    if (std::find(names.begin(), names.end(), field) == names.end()) {
      throw ConfigError("data.columns." + field + ": Ferry reads no field '" + field + "'" +
                        suggestion(field, names) + "; the keys are the fields of docs/data.md (" + join(names, ", ") +
                        ") and the values the file's columns");
    }
    out.columns[field] = column;
  }
  const std::vector<std::string> tag_names = {"role_tag",      "content_tag",  "user_tag",  "assistant_tag",
                                              "observation_tag", "function_tag", "system_tag"};
  std::string* slots[] = {&out.tags.role,        &out.tags.content,  &out.tags.user,  &out.tags.assistant,
                          &out.tags.observation, &out.tags.function, &out.tags.system};
  for (const auto& [tag, value] : read_map(data.tags.json, "tags")) {
    const auto at = std::find(tag_names.begin(), tag_names.end(), tag);
    if (at == tag_names.end()) {
      throw ConfigError("data.tags." + tag + ": unknown ShareGPT tag" + suggestion(tag, tag_names) + "; expected one of " +
                        join(tag_names, ", "));
    }
    *slots[at - tag_names.begin()] = value;
  }
  return out;
}

Json normalize_row(const Json& row, const RowFormat& format) {
  const Json* source = &row;
  Json renamed;
  if (!format.columns.empty()) {
    renamed = row;
    for (const auto& [field, column] : format.columns) {
      if (field == column) continue;
      const auto it = row.find(column);
      if (it == row.end()) continue;
      renamed.erase(field);
      renamed[field] = *it;
      renamed.erase(column);
    }
    source = &renamed;
  }
  const bool alpaca = format.format == DataFormat::alpaca ||
                      (format.format == DataFormat::auto_ && source->contains("instruction") && !source->contains("messages"));
  const bool sharegpt = format.format == DataFormat::sharegpt ||
                        (format.format == DataFormat::auto_ && source->contains("conversations") && !source->contains("messages"));
  if (alpaca) return from_alpaca(*source);
  if (sharegpt) return from_sharegpt(*source, format.tags);
  return *source;
}

}  // namespace ferry
