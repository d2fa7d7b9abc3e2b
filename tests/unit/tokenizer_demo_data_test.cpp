// The shipped demo data (data/*.jsonl, scripts/make_demo_data.py): every answer is re-derived by
// an independent solver written here from the problem text, rejected answers are wrong, eval
// problems never occur in training files, and every conversation fits the demo template in a
// few dozen tokens. Later SFT/RM/PPO accuracy figures are only as good as these labels.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

const std::string kData = std::string(FERRY_SOURCE_DIR) + "/data/";
const std::string kSystem = "You are a careful assistant. Reply with the answer only.";

std::vector<nlohmann::json> read_jsonl(const std::string& name) {
  std::ifstream in(kData + name);
  EXPECT_TRUE(in) << name;
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The one correct answer of a demo problem, or "" when the text is not a known problem kind.
std::string solve(const std::string& q) {
  auto after = [&](const std::string& prefix) { return q.substr(prefix.size()); };
  if (starts_with(q, "What is ") && q.back() == '?') {
    const auto tokens = words_of(q.substr(8, q.size() - 9));  // "a op b op c"
    // Multiplication first, then + and - left to right.
    std::vector<long> terms{std::stol(tokens[0])};
    std::vector<char> ops;
    for (size_t i = 1; i + 1 < tokens.size(); i += 2) {
      const long v = std::stol(tokens[i + 1]);
      if (tokens[i] == "*") {
        terms.back() *= v;
      } else {
        ops.push_back(tokens[i][0]);
        terms.push_back(v);
      }
    }
    long value = terms[0];
    for (size_t i = 0; i < ops.size(); ++i) value = ops[i] == '+' ? value + terms[i + 1] : value - terms[i + 1];
    return std::to_string(value);
  }
  auto numbers = [](const std::string& text) {
    std::vector<long> out;
    for (const auto& w : words_of(text)) out.push_back(std::stol(w));
    return out;
  };
  if (starts_with(q, "Sort from smallest to largest: ")) {
    auto n = numbers(after("Sort from smallest to largest: "));
    std::sort(n.begin(), n.end());
    std::vector<std::string> s;
    for (long v : n) s.push_back(std::to_string(v));
    return joined(s);
  }
  if (starts_with(q, "Which number is the largest: ")) {
    const auto n = numbers(after("Which number is the largest: "));
    return std::to_string(*std::max_element(n.begin(), n.end()));
  }
  if (starts_with(q, "Which number is the smallest: ")) {
    const auto n = numbers(after("Which number is the smallest: "));
    return std::to_string(*std::min_element(n.begin(), n.end()));
  }
  if (starts_with(q, "Reverse the order of these words: ")) {
    auto w = words_of(after("Reverse the order of these words: "));
    std::reverse(w.begin(), w.end());
    return joined(w);
  }
  if (starts_with(q, "Spell the word backwards: ")) {
    std::string w = after("Spell the word backwards: ");
    std::reverse(w.begin(), w.end());
    return w;
  }
  if (starts_with(q, "Write the word in capital letters: ")) {
    std::string w = after("Write the word in capital letters: ");
    for (char& c : w) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return w;
  }
  if (starts_with(q, "How many letters are in the word ") && q.back() == '?') {
    return std::to_string(q.size() - std::string("How many letters are in the word ").size() - 1);
  }
  if (starts_with(q, "How many times does the letter ")) {
    const auto w = words_of(q);  // How many times does the letter c appear in word?
    const char letter = w[6][0];
    const std::string word = w[9].substr(0, w[9].size() - 1);
    return std::to_string(std::count(word.begin(), word.end(), letter));
  }
  return "";
}

Conversation to_conversation(const nlohmann::json& messages) {
  Conversation out;
  for (const auto& m : messages) {
    EXPECT_TRUE(m.contains("role")) << m.dump();
    out.push_back({chat_role_from_string(m["role"].get<std::string>()), m["content"].get<std::string>()});
  }
  return out;
}

TEST(DemoData, SolverKnowsTheTaskKinds) {
  EXPECT_EQ(solve("What is 37 + 48 - 12?"), "73");
  EXPECT_EQ(solve("What is 6 * 7 + 5?"), "47");
  EXPECT_EQ(solve("What is 12 * 9 - 30?"), "78");
  EXPECT_EQ(solve("Sort from smallest to largest: 42 7 19"), "7 19 42");
  EXPECT_EQ(solve("Which number is the smallest: 42 7 19"), "7");
  EXPECT_EQ(solve("Reverse the order of these words: red cat sun"), "sun cat red");
  EXPECT_EQ(solve("Spell the word backwards: garden"), "nedrag");
  EXPECT_EQ(solve("Write the word in capital letters: garden"), "GARDEN");
  EXPECT_EQ(solve("How many letters are in the word garden?"), "6");
  EXPECT_EQ(solve("How many times does the letter a appear in banana?"), "3");
  EXPECT_EQ(solve("Tell me a joke"), "");
}

TEST(DemoData, FilesHaveTheDocumentedSizesAndEveryLabelIsRight) {
  const std::vector<std::pair<std::string, size_t>> files{
      {"sft_train.jsonl", 40000},     {"sft_eval.jsonl", 200},       {"preference_train.jsonl", 2000},
      {"preference_eval.jsonl", 200}, {"prompts_train.jsonl", 1000}, {"prompts_eval.jsonl", 200},
      {"preference_train_large.jsonl", 22000}};
  std::set<std::string> train, eval;
  for (const auto& [name, size] : files) {
    const auto rows = read_jsonl(name);
    ASSERT_EQ(rows.size(), size) << name;
    auto& seen = name.find("_eval") != std::string::npos ? eval : train;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& row = rows[i];
      SCOPED_TRACE(name + ":" + std::to_string(i + 1));
      const bool preference = row.contains("context");
      const Conversation context = to_conversation(preference ? row["context"] : row["messages"]);
      ASSERT_GE(context.size(), 2u);
      EXPECT_EQ(context[0], (ChatMessage{ChatRole::system, kSystem}));
      ASSERT_EQ(context[1].role, ChatRole::user);
      const std::string& question = context[1].content;
      const std::string answer = solve(question);
      ASSERT_FALSE(answer.empty()) << "unknown problem: " << question;
      seen.insert(question);
      if (preference) {
        ASSERT_EQ(context.size(), 2u);
        EXPECT_EQ(to_conversation(row["chosen"]), (Conversation{{ChatRole::assistant, answer}}));
        const Conversation rejected = to_conversation(row["rejected"]);
        ASSERT_EQ(rejected.size(), 1u);
        EXPECT_EQ(rejected[0].role, ChatRole::assistant);
        EXPECT_NE(rejected[0].content, answer);
      } else if (row.contains("gt_answer")) {
        EXPECT_EQ(context.size(), 2u);
        EXPECT_EQ(row["gt_answer"].get<std::string>(), answer);
      } else {
        ASSERT_EQ(context.size(), 3u);
        EXPECT_EQ(context[2], (ChatMessage{ChatRole::assistant, answer}));
      }
    }
  }
  for (const auto& q : eval) EXPECT_EQ(train.count(q), 0u) << "eval problem in a training file: " << q;
}

TEST(DemoData, ConversationsAreShortUnderTheDemoTemplate) {
  const Tokenizer tok(kData + "tokenizer.model");
  const ChatTemplate demo = load_chat_template(std::string(FERRY_SOURCE_DIR) + "/configs/templates/demo.yaml");
  size_t longest = 0, longest_answer = 0;
  for (const auto& row : read_jsonl("sft_train.jsonl")) {
    const auto tokenized = demo.apply(to_conversation(row["messages"]), tok);
    longest = std::max(longest, tokenized.ids.size());
    longest_answer =
        std::max<size_t>(longest_answer, std::count(tokenized.loss_mask.begin(), tokenized.loss_mask.end(), 1));
    EXPECT_EQ(std::find(tokenized.ids.begin(), tokenized.ids.end(), tok.unk_id()), tokenized.ids.end());
  }
  std::printf("demo sft_train: longest conversation %zu tokens, longest answer %zu tokens (with <|end|>)\n", longest,
              longest_answer);
  EXPECT_LE(longest, 64u);
  EXPECT_LE(longest_answer, 16u);
}

}  // namespace
}  // namespace ferry
