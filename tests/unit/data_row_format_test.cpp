// Alpaca and ShareGPT rows, and data.columns / data.tags, read as LLaMA-Factory's converters read them
// (src/data/converter.py: AlpacaDatasetConverter, SharegptDatasetConverter). The rows are the examples of
// LLaMA-Factory's data/README.md; the expected conversations are written out by hand from what those
// converters produce (_system, _prompt, _response; the user turn is instruction + "\n" + input;
// function_call turns are the assistant's tool calls, observation turns tool results).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/config/config.h"
#include "core/error.h"
#include "src/data/row_format.h"

namespace ferry {
namespace {

using Json = nlohmann::ordered_json;

Json normalize(const char* row, const RowFormat& format = {}) { return normalize_row(Json::parse(row), format); }

TEST(RowFormat, AlpacaSupervisedRowWithSystemAndHistory) {
  const Json out = normalize(R"({"instruction": "Add them.", "input": "2 and 3", "output": "5",
    "system": "Be brief.", "history": [["Hi", "Hello!"], ["Who are you?", "An assistant."]]})");
  EXPECT_EQ(out, Json::parse(R"({"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Who are you?"}, {"role": "assistant", "content": "An assistant."},
    {"role": "user", "content": "Add them.\n2 and 3"}, {"role": "assistant", "content": "5"}]})"));
}

TEST(RowFormat, AlpacaWithoutInputOrSystem) {
  EXPECT_EQ(normalize(R"({"instruction": "Say hi.", "input": "", "output": "Hi."})"),
            Json::parse(R"({"messages": [{"role": "user", "content": "Say hi."},
                                         {"role": "assistant", "content": "Hi."}]})"));
}

TEST(RowFormat, AlpacaPreferenceAndKtoRows) {
  EXPECT_EQ(normalize(R"({"instruction": "2+2?", "input": "", "chosen": "4", "rejected": "5"})"),
            Json::parse(R"({"prompt": [{"role": "user", "content": "2+2?"}],
                            "chosen": [{"role": "assistant", "content": "4"}],
                            "rejected": [{"role": "assistant", "content": "5"}]})"));
  EXPECT_EQ(normalize(R"({"instruction": "2+2?", "output": "5", "kto_tag": false})"),
            Json::parse(R"({"prompt": [{"role": "user", "content": "2+2?"}],
                            "completion": [{"role": "assistant", "content": "5"}], "label": false})"));
}

TEST(RowFormat, ShareGptWithFunctionCallObservationSystemAndTools) {
  const Json out = normalize(R"({"conversations": [
      {"from": "human", "value": "Weather in Paris?"},
      {"from": "function_call", "value": "{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}"},
      {"from": "observation", "value": "{\"temp\": 21}"},
      {"from": "gpt", "value": "It is 21 degrees."}],
    "system": "You can call tools.",
    "tools": "[{\"name\": \"weather\", \"description\": \"Weather now\", \"parameters\": {\"type\": \"object\"}}]"})");
  EXPECT_EQ(out, Json::parse(R"({"messages": [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "It is 21 degrees."}],
    "tools": [{"name": "weather", "description": "Weather now", "parameters": {"type": "object"}}]})"));
}

TEST(RowFormat, ShareGptSystemTurnAndPreference) {
  EXPECT_EQ(normalize(R"({"conversations": [{"from": "system", "value": "Be kind."},
                                            {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]})"),
            Json::parse(R"({"messages": [{"role": "system", "content": "Be kind."},
                                         {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})"));
  EXPECT_EQ(normalize(R"({"conversations": [{"from": "human", "value": "2+2?"}],
                          "chosen": {"from": "gpt", "value": "4"}, "rejected": {"from": "gpt", "value": "5"}})"),
            Json::parse(R"({"prompt": [{"role": "user", "content": "2+2?"}],
                            "chosen": [{"role": "assistant", "content": "4"}],
                            "rejected": [{"role": "assistant", "content": "5"}]})"));
}

TEST(RowFormat, ShareGptTurnsOutOfOrderNameTheTurn) {
  try {
    normalize(R"({"conversations": [{"from": "gpt", "value": "Hello"}]})");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"conversations\"[0]"), std::string::npos) << e.what();
  }
}

TEST(RowFormat, ColumnsAndTagsRenameAsDatasetInfoDoes) {
  DataConfig data;
  data.columns.json = R"({"instruction": "question", "output": "answer"})";
  const RowFormat columns = RowFormat::from_config(data);
  EXPECT_EQ(normalize(R"({"question": "Capital of France?", "answer": "Paris."})", columns),
            Json::parse(R"({"messages": [{"role": "user", "content": "Capital of France?"},
                                         {"role": "assistant", "content": "Paris."}]})"));

  DataConfig openai;
  openai.format = DataFormat::sharegpt;
  openai.columns.json = R"({"conversations": "dialog"})";
  openai.tags.json = R"({"role_tag": "speaker", "content_tag": "text", "user_tag": "me", "assistant_tag": "bot"})";
  EXPECT_EQ(normalize(R"({"dialog": [{"speaker": "me", "text": "Hi"}, {"speaker": "bot", "text": "Yo"}]})",
                      RowFormat::from_config(openai)),
            Json::parse(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})"));
}

TEST(RowFormat, UnknownColumnOrTagIsAConfigErrorWithASuggestion) {
  DataConfig data;
  data.columns.json = R"({"promt": "q"})";
  try {
    RowFormat::from_config(data);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.columns.promt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'prompt'"), std::string::npos) << e.what();
  }
  DataConfig tags;
  tags.tags.json = R"({"role": "from"})";
  EXPECT_THROW(RowFormat::from_config(tags), ConfigError);
}

TEST(RowFormat, OtherRowsPassUnchanged) {
  const char* rows[] = {R"({"messages": [{"role": "user", "content": "x"}]})", R"({"prompt": "a", "completion": "b"})",
                        R"({"context": [], "chosen": [], "rejected": []})", R"({"text": "plain"})"};
  for (const char* row : rows) EXPECT_EQ(normalize(row), Json::parse(row)) << row;
}

}  // namespace
}  // namespace ferry
