// The shipped demo data (data/*.jsonl, scripts/make_demo_data.py): every answer is re-derived by
// an independent solver written here from the problem text (demonstrations may instead show the
// documented labeler's slip on sort problems), rejected answers are wrong, reserved problems (eval
// and RL prompts) never occur in another file, and every conversation fits the demo template in a
// few dozen tokens. Later SFT/RM/PPO accuracy figures are only as good as these labels.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
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
  auto numbers = [](const std::string& text) {
    std::vector<long> out;
    for (const auto& w : words_of(text)) out.push_back(std::stol(w));
    return out;
  };
  auto spelled = [](const std::vector<long>& n) {
    std::vector<std::string> s;
    for (long v : n) s.push_back(std::to_string(v));
    return joined(s);
  };
  if (starts_with(q, "What is ") && q.back() == '?') {
    const auto tokens = words_of(q.substr(8, q.size() - 9));  // "a + b + c"
    long value = std::stol(tokens[0]);
    for (size_t i = 1; i + 1 < tokens.size(); i += 2) {
      EXPECT_EQ(tokens[i], "+") << q;
      value += std::stol(tokens[i + 1]);
    }
    return std::to_string(value);
  }
  if (starts_with(q, "Sort from smallest to largest: ")) {
    auto n = numbers(after("Sort from smallest to largest: "));
    std::sort(n.begin(), n.end());
    return spelled(n);
  }
  if (starts_with(q, "Which number is the largest: ")) {
    const auto n = numbers(after("Which number is the largest: "));
    return std::to_string(*std::max_element(n.begin(), n.end()));
  }
  if (starts_with(q, "Which number is the smallest: ")) {
    const auto n = numbers(after("Which number is the smallest: "));
    return std::to_string(*std::min_element(n.begin(), n.end()));
  }
  if (starts_with(q, "Reverse the order of these numbers: ")) {
    auto n = numbers(after("Reverse the order of these numbers: "));
    std::reverse(n.begin(), n.end());
    return spelled(n);
  }
  if (starts_with(q, "How many times does ") && q.back() == '?') {
    const auto w = words_of(q.substr(0, q.size() - 1));  // How many times does d appear in: a b c?
    const std::string digit = w[4];
    return std::to_string(std::count(w.begin() + 7, w.end(), digit));
  }
  return "";
}

// The labeler's slip the SFT files show for some sort problems: largest first.
std::string slip_of(const std::string& question, const std::string& answer) {
  if (!starts_with(question, "Sort from smallest to largest: ")) return "";
  auto w = words_of(answer);
  std::reverse(w.begin(), w.end());
  return joined(w);
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
  EXPECT_EQ(solve("What is 7 + 8 + 4?"), "19");
  EXPECT_EQ(solve("What is 0 + 3?"), "3");
  EXPECT_EQ(solve("Sort from smallest to largest: 4 7 1 9"), "1 4 7 9");
  EXPECT_EQ(solve("Which number is the smallest: 4 7 1"), "1");
  EXPECT_EQ(solve("Which number is the largest: 4 7 1"), "7");
  EXPECT_EQ(solve("Reverse the order of these numbers: 3 1 1 8"), "8 1 1 3");
  EXPECT_EQ(solve("How many times does 3 appear in: 3 1 3 4 3?"), "3");
  EXPECT_EQ(solve("Tell me a joke"), "");
  EXPECT_EQ(slip_of("Sort from smallest to largest: 4 7 1 9", "1 4 7 9"), "9 7 4 1");
}

// Reserved files (scripts/make_demo_data.py RESERVED): no other file holds their problems.
bool reserved(const std::string& name) {
  return name == "sft_eval.jsonl" || name == "preference_eval.jsonl" || name == "prompts_eval.jsonl" ||
         name == "prompts_train.jsonl";
}

TEST(DemoData, FilesHaveTheDocumentedSizesAndEveryLabelIsRight) {
  const std::vector<std::pair<std::string, size_t>> files{
      {"sft_train.jsonl", 38000},     {"sft_eval.jsonl", 200},       {"preference_train.jsonl", 2000},
      {"preference_eval.jsonl", 200}, {"prompts_train.jsonl", 2000}, {"prompts_eval.jsonl", 1000},
      {"preference_train_large.jsonl", 22000}};
  std::map<std::string, std::string> owner;  // reserved question -> its file
  std::set<std::string> unreserved;
  size_t sft_sorts = 0, sft_slips = 0;
  for (const auto& [name, size] : files) {
    const auto rows = read_jsonl(name);
    ASSERT_EQ(rows.size(), size) << name;
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
      if (reserved(name)) {
        const auto [it, fresh] = owner.emplace(question, name);
        EXPECT_TRUE(fresh || it->second == name) << "in " << it->second << " and " << name << ": " << question;
      } else {
        unreserved.insert(question);
      }
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
        // A demonstration: the right answer, or for a sort problem the labeler's slip.
        ASSERT_EQ(context.size(), 3u);
        EXPECT_EQ(context[2].role, ChatRole::assistant);
        const std::string slip = slip_of(question, answer);
        if (!slip.empty() && name == "sft_train.jsonl") {
          ++sft_sorts;
          sft_slips += context[2].content == slip;
        }
        if (slip.empty() || context[2].content != slip) EXPECT_EQ(context[2].content, answer);
      }
    }
  }
  for (const auto& q : unreserved) EXPECT_EQ(owner.count(q), 0u) << "reserved problem in " << owner[q] << ": " << q;
  // SLIP_RATE 0.6 of the sort demonstrations show the slip.
  ASSERT_GT(sft_sorts, 5000u);
  EXPECT_NEAR(static_cast<double>(sft_slips) / sft_sorts, 0.6, 0.02);
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
