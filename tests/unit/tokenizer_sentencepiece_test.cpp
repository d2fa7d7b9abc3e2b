// Tokenizer: loading (and refusing bad files), special ids, pieces, encode/decode on the demo
// tokenizer (data/tokenizer.model). Ids are checked against the model's vocabulary layout that
// scripts/make_demo_data.py defines (ids 0-8: <unk> <s> </s> <pad> and the chat markers).
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/file_util.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

const std::string kDemoModel = std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model";

fs::path scratch_dir() {
  const fs::path dir = ferry::test_support::process_scratch_dir("ferry_tokenizer_test");
  fs::create_directories(dir);
  return dir;
}

void write_bytes(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

template <class F>
std::string input_error_message(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InputError";
  return "";
}

TEST(Tokenizer, DemoModelHasTheDocumentedSpecialIds) {
  const Tokenizer tok(kDemoModel);
  EXPECT_EQ(tok.vocab_size(), 2000);
  EXPECT_EQ(tok.unk_id(), 0);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.pad_id(), 3);
  EXPECT_EQ(tok.piece_to_id("<|system|>"), 4);
  EXPECT_EQ(tok.piece_to_id("<|user|>"), 5);
  EXPECT_EQ(tok.piece_to_id("<|assistant|>"), 6);
  EXPECT_EQ(tok.piece_to_id("<|end|>"), 7);
  EXPECT_EQ(tok.piece_to_id("\n"), 8);
  EXPECT_EQ(tok.piece_to_id("<0x00>"), 9);  // byte pieces follow the user-defined ones
  EXPECT_EQ(tok.id_to_piece(9 + 0x41), "<0x41>");
  EXPECT_TRUE(tok.is_control(1));
  EXPECT_TRUE(tok.is_control(2));
  EXPECT_FALSE(tok.is_control(7));
}

TEST(Tokenizer, PieceLookupDistinguishesAbsentPiecesFromUnk) {
  const Tokenizer tok(kDemoModel);
  EXPECT_EQ(tok.find_piece("<unk>"), std::optional<int64_t>(0));
  EXPECT_EQ(tok.find_piece("no such piece"), std::nullopt);
  const std::string message = input_error_message([&] { tok.piece_to_id("no such piece"); });
  EXPECT_NE(message.find("no such piece"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer.model"), std::string::npos) << message;
}

TEST(Tokenizer, EncodeSplitsDigitsAndKeepsMarkersWhole) {
  const Tokenizer tok(kDemoModel);
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.encode("73"), (std::vector<int64_t>{tok.piece_to_id("7"), tok.piece_to_id("3")}));
  EXPECT_EQ(tok.encode("<|end|>"), std::vector<int64_t>{7});
  EXPECT_EQ(tok.encode("<|user|>\n<|end|>"), (std::vector<int64_t>{5, 8, 7}));
  // No dummy prefix: a leading word has no "▁", a later one does.
  EXPECT_EQ(tok.encode("the"), std::vector<int64_t>{tok.piece_to_id("the")});
  EXPECT_EQ(tok.encode(" the"), std::vector<int64_t>{tok.piece_to_id("▁the")});
}

TEST(Tokenizer, ControlPiecesAreTextUnlessAskedFor) {
  const Tokenizer tok(kDemoModel);
  const auto plain = tok.encode("<s>");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), int64_t{1}), 0);  // a typed "<s>" is not BOS
  const auto x = tok.encode("x");
  std::vector<int64_t> expected{1};
  expected.insert(expected.end(), x.begin(), x.end());
  expected.push_back(2);
  EXPECT_EQ(tok.encode_with_control_pieces("<s>x</s>"), expected);
  EXPECT_EQ(tok.encode_with_control_pieces("</s></s>"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(tok.encode_with_control_pieces("<|end|></s>"), (std::vector<int64_t>{7, 2}));
}

TEST(Tokenizer, DecodeDropsControlIdsAndRoundTrips) {
  const Tokenizer tok(kDemoModel);
  const std::string text = "What is 37 + 48 - 12?\n  two  spaces, café 日本 🙂";
  auto ids = tok.encode(text);
  EXPECT_EQ(tok.decode(ids), text);
  ids.insert(ids.begin(), tok.bos_id());
  ids.push_back(tok.eos_id());
  ids.push_back(tok.pad_id());
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(tok.decode({}), "");
  EXPECT_EQ(tok.decode({7}), "<|end|>");
}

TEST(Tokenizer, IdsOutsideTheVocabularyAreErrors) {
  const Tokenizer tok(kDemoModel);
  EXPECT_NE(input_error_message([&] { tok.decode({5, 2000}); }).find("2000"), std::string::npos);
  EXPECT_THROW(tok.decode({-1}), InputError);
  EXPECT_THROW(tok.id_to_piece(123456), InputError);
  EXPECT_THROW(tok.is_control(-3), InputError);
}

TEST(Tokenizer, MissingFileIsAnInputErrorNamingIt) {
  const std::string message = input_error_message([] { Tokenizer("/nonexistent/dir/tokenizer.model"); });
  EXPECT_NE(message.find("/nonexistent/dir/tokenizer.model"), std::string::npos) << message;
}

TEST(Tokenizer, FolderMeansItsTokenizerModel) {
  const fs::path dir = scratch_dir() / "model_folder";
  fs::create_directories(dir);
  const std::string message = input_error_message([&] { Tokenizer(dir.string()); });
  EXPECT_NE(message.find((dir / "tokenizer.model").string()), std::string::npos) << message;
  fs::copy_file(kDemoModel, dir / "tokenizer.model", fs::copy_options::overwrite_existing);
  EXPECT_EQ(Tokenizer(dir.string()).vocab_size(), 2000);
}

TEST(Tokenizer, CorruptFilesAreInputErrorsNamingThem) {
  const fs::path dir = scratch_dir();
  const std::string model = read_file(kDemoModel);
  const std::vector<std::pair<std::string, std::string>> bad{
      {"empty.model", ""},
      {"text.model", "{\"model\": {\"type\": \"BPE\"}}\n"},
      {"garbage.model", std::string("\xff\xfe\x00\x01garbage\x7f\x80", 14)},
      {"truncated.model", model.substr(0, model.size() / 2)},
      {"head.model", model.substr(0, 7)},
  };
  for (const auto& [name, bytes] : bad) {
    write_bytes(dir / name, bytes);
    const std::string message = input_error_message([&] { Tokenizer((dir / name).string()); });
    EXPECT_NE(message.find(name), std::string::npos) << name << ": " << message;
  }
}

TEST(Tokenizer, MovesKeepTheModel) {
  Tokenizer a(kDemoModel);
  Tokenizer b = std::move(a);
  EXPECT_EQ(b.encode("<|end|>"), std::vector<int64_t>{7});
}

}  // namespace
}  // namespace ferry
