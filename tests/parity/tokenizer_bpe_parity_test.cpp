// BpeTokenizer (tokenizer.json byte-level BPE) against the Python `tokenizers` library
// (tests/parity/tokenizer_bpe_ref.py): for tokenizers trained and configured like Qwen2 (NFC),
// Llama 3 (ignore_merges, a BOS template, its merges also in the legacy "a b" form; variants
// needing the unknown token and byte fallback), SmolLM2 (Digits) and GPT-2 (prefix space,
// lstrip / rstrip / single_word added tokens, trim_offsets; a variant with every Split
// behavior), and >= 2,000 strings each: ids with special tokens matched and kept as text, byte
// offsets of both, decoded text, and decodes of id sequences cut inside characters.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <future>
#include <sstream>

#include "core/file_util.h"
#include "src/tokenizer/bpe_tokenizer.h"

namespace ferry {
namespace {

const nlohmann::json& cases() {
  static const nlohmann::json json =
      nlohmann::json::parse(read_file(std::string(FERRY_FIXTURES_DIR) + "/tokenizer_bpe/cases.json"));
  return json;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

const std::vector<std::string>& texts() {
  static const std::vector<std::string> out = [] {
    std::vector<std::string> v;
    for (const auto& hex : cases()["texts_hex"]) v.push_back(from_hex(hex.get<std::string>()));
    return v;
  }();
  return out;
}

std::string show(const std::vector<int64_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  return out.str();
}

std::vector<int64_t> span_ids(const std::vector<TokenSpan>& spans) {
  std::vector<int64_t> ids;
  for (const auto& s : spans) ids.push_back(s.id);
  return ids;
}

std::vector<std::pair<size_t, size_t>> span_offsets(const std::vector<TokenSpan>& spans) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& s : spans) out.emplace_back(s.begin, s.end);
  return out;
}

std::vector<std::pair<size_t, size_t>> fixture_offsets(const nlohmann::json& offsets) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& o : offsets) out.emplace_back(o[0].get<size_t>(), o[1].get<size_t>());
  return out;
}

// One fixture tokenizer by name (names fixed here: tests are listed before fixtures exist).
class TokenizerBpeParity : public ::testing::TestWithParam<std::string> {
 protected:
  const nlohmann::json& fixture() const {
    for (const auto& t : cases()["files"]) {
      if (t["name"] == GetParam()) return t;
    }
    throw std::runtime_error("no tokenizer '" + GetParam() + "' in cases.json");
  }
};

TEST_P(TokenizerBpeParity, IdsOffsetsAndDecodeEqualPythonTokenizers) {
  const BpeTokenizer tokenizer(fixture()["path"].get<std::string>());
  const auto& all = fixture()["cases"];
  ASSERT_EQ(all.size(), texts().size());
  size_t mismatches = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string& text = texts()[i];
    const auto& c = all[i];
    const auto control = c["control_ids"].get<std::vector<int64_t>>();
    const auto plain = c["plain_ids"].get<std::vector<int64_t>>();
    const auto control_spans = tokenizer.encode_with_control_pieces_and_offsets(text);
    const auto plain_spans = tokenizer.encode_with_offsets(text);
    const bool ok = tokenizer.encode_with_control_pieces(text) == control && tokenizer.encode(text) == plain &&
                    span_ids(control_spans) == control && span_ids(plain_spans) == plain &&
                    span_offsets(control_spans) == fixture_offsets(c["control_offsets"]) &&
                    span_offsets(plain_spans) == fixture_offsets(c["plain_offsets"]) &&
                    tokenizer.decode(control) == from_hex(c["decoded_hex"]);
    if (!ok && ++mismatches <= 5) {
      SCOPED_TRACE("string " + std::to_string(i) + " (hex " + cases()["texts_hex"][i].get<std::string>() + "): '" +
                   text + "'");
      EXPECT_EQ(show(tokenizer.encode_with_control_pieces(text)), show(control));
      EXPECT_EQ(show(tokenizer.encode(text)), show(plain));
      EXPECT_EQ(span_offsets(control_spans), fixture_offsets(c["control_offsets"]));
      EXPECT_EQ(span_offsets(plain_spans), fixture_offsets(c["plain_offsets"]));
      EXPECT_EQ(tokenizer.decode(control), from_hex(c["decoded_hex"]));
    }
  }
  EXPECT_EQ(mismatches, 0u) << fixture()["name"].get<std::string>() << ": " << mismatches << " of " << all.size()
                            << " strings differ from tokenizers " << cases()["library_version"].get<std::string>();
  std::printf("BpeTokenizer parity: %s: %zu strings, %zu differ (ids both ways, offsets, decode)\n",
              fixture()["name"].get<std::string>().c_str(), all.size(), mismatches);
}

TEST_P(TokenizerBpeParity, DecodeOfCutSequencesEqualsPython) {
  const BpeTokenizer tokenizer(fixture()["path"].get<std::string>());
  for (const auto& c : fixture()["decode_cases"]) {
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    EXPECT_EQ(tokenizer.decode(ids), from_hex(c["decoded_hex"])) << show(ids);
  }
}

TEST_P(TokenizerBpeParity, VocabularySpecialTokensAndTemplateMatchTheFile) {
  const BpeTokenizer tokenizer(fixture()["path"].get<std::string>());
  EXPECT_EQ(tokenizer.vocab_size(), fixture()["max_id_plus_one"].get<int64_t>());
  for (const auto& p : fixture()["pieces"]) {
    const auto piece = p[0].get<std::string>();
    const auto id = p[1].get<int64_t>();
    EXPECT_EQ(tokenizer.find_piece(piece), std::optional<int64_t>(id)) << piece;
    EXPECT_EQ(tokenizer.id_to_piece(id), piece);
  }
  auto specials = tokenizer.special_tokens();
  std::sort(specials.begin(), specials.end());
  std::vector<std::pair<std::string, int64_t>> expected;
  for (const auto& s : fixture()["special_tokens"]) expected.emplace_back(s[0].get<std::string>(), s[1].get<int64_t>());
  EXPECT_EQ(specials, expected);
  for (const auto& [content, id] : expected) EXPECT_TRUE(tokenizer.is_special(id)) << content;
  const auto& leading = fixture()["leading_special_id"];
  EXPECT_EQ(tokenizer.leading_special_id(),
            leading.is_null() ? std::nullopt : std::optional<int64_t>(leading.get<int64_t>()));
}

TEST_P(TokenizerBpeParity, ConcurrentEncodesAgree) {
  const BpeTokenizer tokenizer(fixture()["path"].get<std::string>());
  const auto& all = fixture()["cases"];
  auto worker = [&](size_t offset) {
    size_t wrong = 0;
    for (size_t k = 0; k < all.size(); ++k) {
      const size_t i = (k + offset) % all.size();
      wrong += tokenizer.encode_with_control_pieces(texts()[i]) != all[i]["control_ids"].get<std::vector<int64_t>>();
    }
    return wrong;
  };
  std::vector<std::future<size_t>> runs;
  for (size_t t = 0; t < 4; ++t) runs.push_back(std::async(std::launch::async, worker, t * 97));
  for (auto& r : runs) EXPECT_EQ(r.get(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizerBpeParity,
                         ::testing::Values("qwen2", "llama3", "gpt2", "smollm2", "llama3_legacy_merges",
                                           "llama3_unk", "llama3_byte_fallback", "gpt2_splits"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(TokenizerBpeParity, FixtureCoversTheCases) {
  EXPECT_GE(texts().size(), 2000u);
  EXPECT_EQ(cases()["files"].size(), 8u);
  EXPECT_TRUE(std::find(texts().begin(), texts().end(), "") != texts().end());
}

}  // namespace
}  // namespace ferry
