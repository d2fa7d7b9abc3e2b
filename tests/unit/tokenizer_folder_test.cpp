// Tokenizer picks its backend by what a model folder holds (tokenizer.model first, else
// tokenizer.json), takes a tokenizer.json's BOS/EOS/pad from tokenizer_config.json (or
// config.json's ids when there is none), and lists the files a saved model folder needs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/small_bpe_tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ferry {
namespace {

const std::string kDemoModel = std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model";

// A fresh folder per test holding the small tokenizer.json (ids: bytes 0-255, "he" 256, "Ġt" 257,
// "Ġthe" 258, special <|end|> 259).
fs::path bpe_folder(const std::string& name) {
  const fs::path dir = ferry::test_support::process_scratch_dir("ferry_tokenizer_folder") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << small_bpe_tokenizer_json().dump();
  return dir;
}

void write_json(const fs::path& path, const json& value) { std::ofstream(path) << value.dump(1); }

TEST(TokenizerFolder, AFolderWithOnlyTokenizerJsonLoadsByteLevelBpe) {
  const fs::path dir = bpe_folder("bpe");
  write_json(dir / "tokenizer_config.json",
             {{"bos_token", nullptr}, {"eos_token", "<|end|>"}, {"pad_token", {{"content", "<|end|>"}}}});
  const Tokenizer tokenizer(dir.string());
  EXPECT_EQ(tokenizer.kind(), TokenizerKind::byte_level_bpe);
  EXPECT_EQ(tokenizer.path(), (dir / "tokenizer.json").string());
  EXPECT_EQ(tokenizer.vocab_size(), 260);
  EXPECT_EQ(tokenizer.encode("the"), (std::vector<int64_t>{'t', 256}));
  EXPECT_EQ(tokenizer.encode(" the"), (std::vector<int64_t>{258}));
  // Special tokens are text in user content, ids in template markers.
  EXPECT_EQ(tokenizer.encode("<|end|>").size(), 7u);
  EXPECT_EQ(tokenizer.encode_with_control_pieces("he<|end|>"), (std::vector<int64_t>{256, 259}));
  EXPECT_TRUE(tokenizer.is_control(259));
  EXPECT_FALSE(tokenizer.is_control(256));
  EXPECT_EQ(tokenizer.decode({258, 259}), " the");
  EXPECT_EQ(tokenizer.bos_id(), -1);  // bos_token: null means none, as Qwen2.5's
  EXPECT_EQ(tokenizer.eos_id(), 259);
  EXPECT_EQ(tokenizer.pad_id(), 259);
  EXPECT_EQ(tokenizer.files(),
            (std::vector<std::string>{(dir / "tokenizer.json").string(), (dir / "tokenizer_config.json").string()}));
  EXPECT_EQ(tokenizer.hf_config().eos_token, "<|end|>");
}

TEST(TokenizerFolder, WithoutTokenizerConfigTheIdsComeFromConfigJson) {
  const fs::path dir = bpe_folder("ids");
  write_json(dir / "config.json", {{"bos_token_id", 259}, {"eos_token_id", json::array({259, 1})}});
  const Tokenizer tokenizer(dir.string());
  EXPECT_EQ(tokenizer.bos_id(), 259);
  EXPECT_EQ(tokenizer.eos_id(), 259);  // the first of a list
  EXPECT_EQ(tokenizer.pad_id(), -1);
  EXPECT_EQ(tokenizer.files(), (std::vector<std::string>{(dir / "tokenizer.json").string()}));
}

TEST(TokenizerFolder, TheChatTemplatesComeFromTheFilesOrTheConfig) {
  const fs::path dir = bpe_folder("template");
  write_json(dir / "tokenizer_config.json",
             {{"chat_template", json::array({{{"name", "tool_use"}, {"template", "T"}},
                                             {{"name", "default"}, {"template", "D"}}})}});
  const Tokenizer listed(dir.string());
  EXPECT_EQ(listed.hf_config().chat_template_names(), (std::vector<std::string>{"tool_use", "default"}));
  EXPECT_EQ(listed.hf_config().chat_template("default")->source, "D");
  EXPECT_EQ(listed.hf_config().chat_template("tool_use")->source, "T");
  EXPECT_EQ(listed.hf_config().chat_template("rag"), nullptr);
  // chat_template.json, then chat_template.jinja and additional_chat_templates/, win over the config.
  write_json(dir / "chat_template.json", {{"chat_template", "C"}});
  EXPECT_EQ(Tokenizer(dir.string()).hf_config().chat_template("default")->source, "C");
  std::ofstream(dir / "chat_template.jinja") << "J";
  fs::create_directories(dir / "additional_chat_templates");
  std::ofstream(dir / "additional_chat_templates" / "rag.jinja") << "R";
  const Tokenizer tokenizer(dir.string());
  EXPECT_EQ(tokenizer.hf_config().chat_template_names(), (std::vector<std::string>{"default", "rag"}));
  EXPECT_EQ(tokenizer.hf_config().chat_template("default")->source, "J");
  EXPECT_EQ(tokenizer.hf_config().chat_template("default")->file, (dir / "chat_template.jinja").string());
  EXPECT_EQ(tokenizer.hf_config().chat_template("rag")->source, "R");
  // A saved model folder gets them all, the named ones in their subfolder.
  const auto& files = tokenizer.files();
  ASSERT_GE(files.size(), 3u);
  EXPECT_EQ(files[files.size() - 2], (dir / "chat_template.json").string());
  EXPECT_EQ(files.back(), (dir / "additional_chat_templates" / "rag.jinja").string());
  EXPECT_EQ(tokenizer.side_file_name(files.back()), "additional_chat_templates/rag.jinja");
}

TEST(TokenizerFolder, TokenizerModelWinsWhenTheFolderHoldsBoth) {
  const fs::path dir = bpe_folder("both");
  fs::copy_file(kDemoModel, dir / "tokenizer.model");
  const Tokenizer tokenizer(dir.string());
  EXPECT_EQ(tokenizer.kind(), TokenizerKind::sentencepiece);
  EXPECT_EQ(tokenizer.files(), (std::vector<std::string>{(dir / "tokenizer.model").string()}));
  // A tokenizer.json named directly is read as one.
  EXPECT_EQ(Tokenizer((dir / "tokenizer.json").string()).kind(), TokenizerKind::byte_level_bpe);
}

TEST(TokenizerFolder, ASpecialTokenTheVocabularyLacksIsAnErrorNamingTheConfig) {
  const fs::path dir = bpe_folder("bad");
  write_json(dir / "tokenizer_config.json", {{"eos_token", "<|im_end|>"}});
  try {
    Tokenizer tokenizer(dir.string());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find((dir / "tokenizer_config.json").string()), std::string::npos) << message;
    EXPECT_NE(message.find("eos_token '<|im_end|>'"), std::string::npos) << message;
  }
}

// A model folder whose tokenizer file is a link to somewhere else is refused, naming both; a file
// named directly (tokenizer.path: data/tokenizer.model) is what the user chose and is read.
TEST(TokenizerFolder, ATokenizerLinkOutOfTheFolderIsRefused) {
  const fs::path dir = bpe_folder("linked");
  fs::remove(dir / "tokenizer.json");
  fs::create_symlink(kDemoModel, dir / "tokenizer.model");
  try {
    const Tokenizer tokenizer(dir.string());
    ADD_FAILURE() << "a link out of the folder was followed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("' is a link to '" + fs::weakly_canonical(kDemoModel).string() +
                                         "', outside the model folder"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(Tokenizer(kDemoModel).kind(), TokenizerKind::sentencepiece);
}

TEST(TokenizerFolder, AFolderWithNeitherFileSaysWhatItLooksFor) {
  const fs::path dir = bpe_folder("empty");
  fs::remove(dir / "tokenizer.json");
  try {
    Tokenizer tokenizer(dir.string());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("tokenizer.model"), std::string::npos) << message;
    EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace ferry
