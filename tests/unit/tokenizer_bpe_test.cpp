// BpeTokenizer on small tokenizer.json files written here: the behaviours the parity fixture takes
// for granted (markers as text or ids, decode, lookups, folders, the template's leading id) and
// every refusal: missing or malformed files and each component type Ferry does not reproduce,
// with messages that name the file and the JSON field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "src/tokenizer/bpe_tokenizer.h"
#include "src/tokenizer/byte_level.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/small_bpe_tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ferry {
namespace {

fs::path scratch_dir() {
  const fs::path dir = ferry::test_support::process_scratch_dir("ferry_tokenizer_bpe_test");
  fs::create_directories(dir);
  return dir;
}

json small_tokenizer() { return small_bpe_tokenizer_json(); }

std::string write(const json& tokenizer, const std::string& name = "tokenizer.json") {
  const fs::path path = scratch_dir() / name;
  std::ofstream(path) << tokenizer.dump(1);
  return path.string();
}

std::string input_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InputError";
  return "";
}

// The message of loading `tokenizer`, which must fail; checks it names the file.
std::string load_error(const json& tokenizer) {
  const std::string path = write(tokenizer, "bad.tokenizer.json");
  const std::string message = input_error_message([&] { BpeTokenizer{path}; });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  return message;
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST(BpeTokenizer, EncodesMergesAndKeepsSpecialTokensAsTextUnlessAsked) {
  const BpeTokenizer tok(write(small_tokenizer()));
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.encode(" the"), std::vector<int64_t>{258});
  EXPECT_EQ(tok.encode("he he"), (std::vector<int64_t>{256, ' ', 256}));
  EXPECT_TRUE(tok.encode("").empty());
  // A typed special token is text...
  EXPECT_EQ(tok.encode("<|end|>"), (std::vector<int64_t>{'<', '|', 'e', 'n', 'd', '|', '>'}));
  // ... unless the caller renders a chat template.
  EXPECT_EQ(tok.encode_with_control_pieces("he<|end|> the"), (std::vector<int64_t>{256, 259, 258}));
  EXPECT_TRUE(tok.is_special(259));
  EXPECT_FALSE(tok.is_special(258));
  EXPECT_EQ(tok.special_tokens(), (std::vector<std::pair<std::string, int64_t>>{{"<|end|>", 259}}));
  EXPECT_EQ(tok.leading_special_id(), std::nullopt);
}

TEST(BpeTokenizer, OffsetsAreBytesOfTheInput) {
  const BpeTokenizer tok(write(small_tokenizer()));
  // "é" is two bytes, each its own byte piece: both own the whole character.
  const auto spans = tok.encode_with_control_pieces_and_offsets("é the<|end|>");
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0].begin, 0u);
  EXPECT_EQ(spans[0].end, 2u);
  EXPECT_EQ(spans[1].begin, 0u);
  EXPECT_EQ(spans[1].end, 2u);
  EXPECT_EQ(spans[2].id, 258);
  EXPECT_EQ(spans[2].begin, 2u);
  EXPECT_EQ(spans[2].end, 6u);
  EXPECT_EQ(spans[3].id, 259);
  EXPECT_EQ(spans[3].begin, 6u);
  EXPECT_EQ(spans[3].end, 13u);
}

TEST(BpeTokenizer, DecodeSkipsSpecialTokensAndRepairsCutCharacters) {
  const BpeTokenizer tok(write(small_tokenizer()));
  const std::string text = "What is 37 + 48?\n  two  spaces, café 日本 🙂";
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
  EXPECT_EQ(tok.decode({259, 258, 259}), " the");
  EXPECT_EQ(tok.decode({0xE6}), "\xEF\xBF\xBD");                   // half a character -> U+FFFD
  EXPECT_EQ(tok.decode({0xE6, 0x97, 'a'}), "\xEF\xBF\xBD" "a");    // one U+FFFD for a cut prefix
  EXPECT_EQ(tok.decode({}), "");
}

TEST(BpeTokenizer, LookupsAndIdsOutsideTheVocabulary) {
  const BpeTokenizer tok(write(small_tokenizer()));
  EXPECT_EQ(tok.find_piece("Ġthe"), std::optional<int64_t>(258));
  EXPECT_EQ(tok.find_piece("<|end|>"), std::optional<int64_t>(259));
  EXPECT_EQ(tok.find_piece(" the"), std::nullopt);  // pieces are spelled in ByteLevel characters
  EXPECT_EQ(tok.id_to_piece(257), "Ġt");
  EXPECT_EQ(tok.id_to_piece(259), "<|end|>");
  EXPECT_CONTAINS(input_error_message([&] { tok.piece_to_id("nope"); }), "nope");
  EXPECT_CONTAINS(input_error_message([&] { tok.decode({5, 260}); }), "260");
  EXPECT_THROW(tok.decode({-1}), InputError);
  EXPECT_THROW(tok.id_to_piece(300), InputError);
}

TEST(BpeTokenizer, TextThatIsNotUtf8IsAnInputError) {
  const BpeTokenizer tok(write(small_tokenizer()));
  EXPECT_CONTAINS(input_error_message([&] { tok.encode("ok\xFF"); }), "not valid UTF-8 (byte 2");
  EXPECT_THROW(tok.encode_with_offsets("\xC3"), InputError);
}

TEST(BpeTokenizer, FolderMeansItsTokenizerJson) {
  write(small_tokenizer());
  const BpeTokenizer tok(scratch_dir().string());
  EXPECT_EQ(tok.path(), (scratch_dir() / "tokenizer.json").string());
}

TEST(BpeTokenizer, TemplateProcessingGivesTheLeadingSpecialId) {
  json t = small_tokenizer();
  t["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       json::array({{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}},
                    {{"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}},
                                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                     {"pair", json::array()},
                     {"special_tokens",
                      {{"<|end|>", {{"id", "<|end|>"}, {"ids", {259}}, {"tokens", {"<|end|>"}}}}}}}})}};
  const BpeTokenizer tok(write(t, "template.json"));
  EXPECT_EQ(tok.leading_special_id(), std::optional<int64_t>(259));
  EXPECT_EQ(tok.encode("the"), (std::vector<int64_t>{'t', 256}));  // encode itself adds nothing
}

TEST(BpeTokenizer, AddedTokenIdsFollowTheLibraryNotTheFile) {
  // The library numbers a new added token after the vocabulary whatever the file says (and warns).
  json t = small_tokenizer();
  t["added_tokens"][0]["id"] = 500;
  const BpeTokenizer tok(write(t, "renumbered.json"));
  EXPECT_EQ(tok.encode_with_control_pieces("<|end|>"), std::vector<int64_t>{259});
}

TEST(BpeTokenizer, AddedTokensNeedEveryField) {
  json t = small_tokenizer();
  t["added_tokens"][0].erase("normalized");
  EXPECT_CONTAINS(load_error(t), "added_tokens[0].normalized is missing");
}

TEST(BpeTokenizer, MissingOrMalformedFilesAreInputErrors) {
  EXPECT_CONTAINS(input_error_message([] { BpeTokenizer("/nonexistent/dir/tokenizer.json"); }),
                  "'/nonexistent/dir/tokenizer.json' does not exist");
  const fs::path bad = scratch_dir() / "malformed.json";
  std::ofstream(bad) << "{\"model\": {\"type\": \"BPE\", ";
  EXPECT_CONTAINS(input_error_message([&] { BpeTokenizer{bad.string()}; }), "is not valid JSON");
  std::ofstream(bad, std::ios::trunc) << "[1, 2]";
  EXPECT_CONTAINS(input_error_message([&] { BpeTokenizer{bad.string()}; }), "not a JSON object");
  json t = small_tokenizer();
  t.erase("model");
  EXPECT_CONTAINS(load_error(t), "model is missing");
}

TEST(BpeTokenizer, UnsupportedNormalizersAreNamed) {
  json t = small_tokenizer();
  t["normalizer"] = {{"type", "NFKD"}};
  EXPECT_CONTAINS(load_error(t), ": normalizer.type 'NFKD' is not supported (supported: NFC, Sequence)");
  t["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "Lowercase"}}})}};
  EXPECT_CONTAINS(load_error(t), "normalizer.normalizers[1].type 'Lowercase' is not supported");
  t["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
  EXPECT_NO_THROW(BpeTokenizer{write(t, "nfc.json")});
}

TEST(BpeTokenizer, UnsupportedPreTokenizersAreNamed) {
  json t = small_tokenizer();
  t["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  EXPECT_CONTAINS(load_error(t),
                  "pre_tokenizer.type 'Metaspace' is not supported (supported: Sequence, Split, Digits, ByteLevel)");
  const json split = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}, {"invert", false}};
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({split, {{"type", "Whitespace"}}})}};
  EXPECT_CONTAINS(load_error(t), "pre_tokenizer.pretokenizers[1].type 'Whitespace' is not supported");
  t["pre_tokenizer"] = split;
  EXPECT_CONTAINS(load_error(t), "pre_tokenizer has no ByteLevel step");
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({byte_level, split})}};
  EXPECT_CONTAINS(load_error(t), "ByteLevel must be the last");
  t["pre_tokenizer"] = nullptr;
  EXPECT_CONTAINS(load_error(t), "pre_tokenizer is null");
  json odd = split;
  odd["behavior"] = "Sideways";
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({odd, byte_level})}};
  EXPECT_CONTAINS(load_error(t), "pre_tokenizer.pretokenizers[0].behavior 'Sideways' is not supported");
  odd = split;
  odd["pattern"] = {{"Regex", "(unclosed"}};
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({odd, byte_level})}};
  EXPECT_CONTAINS(load_error(t),
                  "pre_tokenizer.pretokenizers[0].pattern.Regex '(unclosed' is not a valid regular expression");
}

TEST(BpeTokenizer, UnsupportedModelsAndOptionsAreNamed) {
  json t = small_tokenizer();
  t["model"]["type"] = "WordPiece";
  EXPECT_CONTAINS(load_error(t), "model.type 'WordPiece' is not supported (supported: BPE)");
  t = small_tokenizer();
  t["model"]["dropout"] = 0.1;
  EXPECT_CONTAINS(load_error(t), "model.dropout 0.1 is not supported");
  t = small_tokenizer();
  t["model"]["continuing_subword_prefix"] = "##";
  EXPECT_CONTAINS(load_error(t), "model.continuing_subword_prefix '##' is not supported");
  t = small_tokenizer();
  t["model"]["merges"].push_back("x yz");
  EXPECT_CONTAINS(load_error(t), "model.merges[3] 'x yz' uses 'yz', which is not in model.vocab");
  t = small_tokenizer();
  t["model"]["merges"].push_back("a b c");
  EXPECT_CONTAINS(load_error(t), "model.merges[3] 'a b c' is not two pieces separated by one space");
  t = small_tokenizer();
  t["model"]["unk_token"] = "<unk>";
  EXPECT_CONTAINS(load_error(t), "model.unk_token '<unk>' is not in model.vocab");
}

TEST(BpeTokenizer, UnsupportedDecodersAndPostProcessorsAreNamed) {
  json t = small_tokenizer();
  t["decoder"] = {{"type", "WordPiece"}};
  EXPECT_CONTAINS(load_error(t), "decoder.type 'WordPiece' is not supported (supported: ByteLevel, Sequence)");
  t["decoder"] = nullptr;
  EXPECT_CONTAINS(load_error(t), "decoder is null");
  t["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({{{"type", "ByteLevel"}}, {{"type", "Strip"}}})}};
  EXPECT_CONTAINS(load_error(t), "decoder.decoders[1].type 'Strip' is not supported (supported: ByteLevel, Fuse)");
  t["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({{{"type", "ByteLevel"}}, {{"type", "Fuse"}}})}};
  EXPECT_NO_THROW(BpeTokenizer{write(t, "fuse.json")});
  t = small_tokenizer();
  t["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_CONTAINS(load_error(t),
                  "post_processor.type 'RobertaProcessing' is not supported "
                  "(supported: ByteLevel, TemplateProcessing, Sequence)");
}

}  // namespace
}  // namespace ferry
