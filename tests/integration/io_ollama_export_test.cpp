// `ferry export --format ollama` as a user runs it on a run's checkpoint: the folder gets model.gguf (or
// the base and adapter.gguf) and a Modelfile with FROM, the chat template as TEMPLATE, its stop
// parameter and the training data's shared system prompt; the `ollama create` line is printed, and
// --create runs it (a stand-in `ollama` on PATH records its arguments; with none, exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/file_util.h"
#include "tests/integration/ferry_process.h"

namespace {

namespace fs = std::filesystem;
using ferry_test::run_command;

// A small llama with a SentencePiece tokenizer (tests/parity/gguf_export_ref.py's models).
const fs::path kModels = fs::path(FERRY_FIXTURES_DIR) / "gguf_export";

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

class OllamaExport : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kModels / "llama_spm" / "config.json")) << "missing fixture " << kModels;
    root_ = fs::temp_directory_path() / ("ferry_ollama_export_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    // A run folder as Ferry writes it: config.yaml beside final/.
    fs::create_directories(root_ / "run" / "final");
    for (const auto& entry : fs::directory_iterator(kModels / "llama_spm")) {
      fs::copy(entry.path(), root_ / "run" / "final" / entry.path().filename());
    }
    std::ofstream(root_ / "chats.jsonl")
        << R"({"messages": [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})"
        << "\n"
        << R"({"messages": [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]})"
        << "\n";
    std::ofstream(root_ / "run" / "config.yaml")
        << "stage: sft\ntokenizer: {chat_template: demo}\ndata: {train_file: " << (root_ / "chats.jsonl").string() << "}\n";
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(root_);
  }
  ferry_test::CommandResult ferry(const std::string& args, const std::string& env = "") {
    return run_command(env + "'" + std::string(FERRY_BINARY) + "' " + args);
  }
  fs::path root_;
};

TEST_F(OllamaExport, FolderWithModelAndModelfile) {
  const fs::path out = root_ / "my-model";
  const auto r = ferry("export --format ollama --checkpoint " + quoted(root_ / "run" / "final") + " --output " +
                       quoted(out) + " --gguf-type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_regular_file(out / "model.gguf"));
  const std::string modelfile = ferry::read_file(out / "Modelfile");
  EXPECT_NE(modelfile.find("\nFROM ./model.gguf\n"), std::string::npos) << modelfile;
  EXPECT_NE(modelfile.find("TEMPLATE \"\"\"{{ if .System }}<|system|>\n{{ .System }}<|end|>\n"), std::string::npos)
      << modelfile;
  EXPECT_NE(modelfile.find("\nSYSTEM \"\"\"You answer briefly.\"\"\"\n"), std::string::npos) << modelfile;
  EXPECT_NE(modelfile.find("\nPARAMETER stop \"<|end|>\"\n"), std::string::npos) << modelfile;
  EXPECT_EQ(modelfile.find("ADAPTER"), std::string::npos) << modelfile;
  EXPECT_NE(r.output.find("ollama create 'my-model' -f '" + (out / "Modelfile").string() + "'"), std::string::npos)
      << r.output;
}

TEST_F(OllamaExport, CreateRunsOllamaOrSaysItIsMissing) {
  const fs::path out = root_ / "m";
  const std::string args = "export --format ollama --name tiny --create --checkpoint " +
                           quoted(root_ / "run" / "final") + " --output " + quoted(out);
  const auto missing = ferry(args, "PATH=/nonexistent ");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("no ollama program is on PATH"), std::string::npos) << missing.output;
  // A stand-in ollama records how it was called.
  fs::create_directories(root_ / "bin");
  std::ofstream(root_ / "bin" / "ollama") << "#!/bin/sh\necho \"$@\" > " << (root_ / "called").string() << "\n";
  fs::permissions(root_ / "bin" / "ollama", fs::perms::owner_all);
  const auto created = ferry(args, "PATH=" + (root_ / "bin").string() + ":/usr/bin:/bin ");
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_EQ(ferry::read_file(root_ / "called"), "create tiny -f " + (out / "Modelfile").string() + "\n");
}

TEST_F(OllamaExport, WrongRequestsAreUserErrors) {
  const std::string in = quoted(root_ / "run" / "final");
  auto r = ferry("export --format ollama --lora none --checkpoint " + in + " --output " + quoted(root_ / "o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = ferry("export --format ollama --checkpoint " + in + " --output " + quoted(root_ / "x.gguf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = ferry("export --format gguf --create --checkpoint " + in + " --output " + quoted(root_ / "y.gguf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
