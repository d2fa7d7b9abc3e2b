// `ferry export --format gguf` as a user runs it, on model folders written by transformers and the
// tokenizers library (tests/parity/gguf_export_ref.py): gguf-py's GGUFReader reads every file back,
// and tests/parity/gguf_export_check.py compares every metadata value and every tensor's name,
// shape, type and bytes with its own conversion of the source (f32, f16, bf16, q8_0; a SentencePiece
// llama with llama3 rope, a Qwen2 with a byte-level BPE tokenizer, a LoRA checkpoint with a
// Llama 3-style tokenizer). Impossible requests and bad inputs are user errors (exit 2) that say
// what to do. llama.cpp itself (llama-cpp-python, which scripts/deps.sh installs in the deps venv)
// loads an export and must give transformers' logits and `ferry generate`'s greedy tokens
// (tests/parity/gguf_llama_cpp_check.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/integration/ferry_process.h"

namespace {

namespace fs = std::filesystem;
using ferry_test::run_command;

// File names below start "./" or "/": tests/CMakeLists.txt reads a quoted "<stem> in a test's source
// as a fixture the test needs, and tests/parity/tokenizer_ref.py is the fixture named tokenizer.

// Input models (tests/parity/gguf_export_ref.py, run once as the gguf_export fixture).
const fs::path kModels = fs::path(FERRY_FIXTURES_DIR) / "gguf_export";

std::string quoted(const fs::path& path) {
  std::string out(1, '\'');
  out.append(path.string()).push_back('\'');
  return out;
}

ferry_test::CommandResult ferry(const std::string& args) {
  return run_command(std::string("'") + FERRY_BINARY + "' " + args);
}

ferry_test::CommandResult python(const std::string& script, const std::string& args) {
  return run_command(std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                     "/tests/parity/" + script + "' " + args);
}

class IoGgufExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kModels / "llama_spm" / "config.json"))
        << "missing fixture " << kModels << " (run the parity_fixture_gguf_export test first)";
    root_ = fs::temp_directory_path() / ("ferry_gguf_export_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(root_);  // keep the files to inspect a failure
  }

  // Exports `model` as `type` to `output` and has the checker compare the file with its source.
  void export_and_check(const std::string& model, const std::string& type, const fs::path& output,
                        const fs::path& file, const std::string& arch, const std::string& pre,
                        const std::string& extra = "", const std::string& name = "") {
    SCOPED_TRACE(model + " as " + type);
    const auto r = ferry("export --format gguf --gguf-type " + type + " --checkpoint " + quoted(kModels / model) +
                         " --output " + quoted(output) + " " + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("as GGUF " + arch), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(file.string()), std::string::npos) << r.output;
    ASSERT_TRUE(fs::exists(file)) << r.output;
    const auto check = python("gguf_export_check.py", quoted(kModels / model) + " " + quoted(file) + " --type " + type +
                                                          " --arch " + arch + " --pre " + pre + " --name " +
                                                          (name.empty() ? model : name));
    EXPECT_EQ(check.exit_code, 0) << check.output;
  }

  fs::path root_;
};

TEST_F(IoGgufExportTest, SentencePieceLlamaEveryType) {
  for (const std::string type : {"f32", "f16", "bf16", "q8_0"}) {
    const fs::path file = root_ / ("llama_" + type + ".gguf");
    export_and_check("llama_spm", type, file, file, "llama", "default");
  }
}

TEST_F(IoGgufExportTest, ByteLevelBpeQwen2EveryTypeIntoAFolder) {
  for (const std::string type : {"f32", "f16", "bf16", "q8_0"}) {
    const fs::path folder = root_ / ("qwen2_" + type);  // not *.gguf: a folder that gets model.gguf
    export_and_check("qwen2_bpe", type, folder, folder / "model.gguf", "qwen2", "qwen2");
  }
}

TEST_F(IoGgufExportTest, LoraCheckpointIsMergedWithLlama3Tokenizer) {
  for (const std::string type : {"f16", "q8_0"}) {
    const fs::path file = root_ / ("lora_" + type + ".gguf");
    export_and_check("llama_lora_bpe", type, file, file, "llama", "llama-bpe");
  }
  const auto r = ferry("export --format gguf --checkpoint " + quoted(kModels / "llama_lora_bpe") + " --output " +
                       quoted(root_ / "again.gguf"));
  EXPECT_NE(r.output.find("with LoRA merged"), std::string::npos) << r.output;
}

TEST_F(IoGgufExportTest, NamesComeFromTheFolderOrTheFlag) {
  // A Ferry checkpoint folder ("<run>/final") is named after its run.
  const fs::path run = root_ / "demo-run" / "final";
  fs::create_directories(run);
  for (const auto& entry : fs::directory_iterator(kModels / "llama_spm")) {
    fs::copy(entry.path(), run / entry.path().filename());
  }
  auto r = ferry("export --format gguf --checkpoint " + quoted(run) + " --output " + quoted(root_ / "a.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("'demo-run-final'"), std::string::npos) << r.output;
  auto check = python("gguf_export_check.py", quoted(run) + " " + quoted(root_ / "a.gguf") +
                                                  " --type f16 --arch llama --name demo-run-final");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  export_and_check("llama_spm", "f32", root_ / "b.gguf", root_ / "b.gguf", "llama", "default", "--gguf-name 'My Model'",
                   "'My Model'");
}

TEST_F(IoGgufExportTest, UnknownPreTokenizerNeedsTheFlag) {
  const fs::path file = root_ / "gpt2.gguf";
  auto r = ferry("export --format gguf --checkpoint " + quoted(kModels / "gpt2_prefix_space") + " --output " +
                 quoted(file));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/tokenizer.json: pre_tokenizer"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--gguf-pre"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(fs::is_empty(root_)) << "a failed export left files behind";
  export_and_check("gpt2_prefix_space", "f16", file, file, "qwen2", "gpt-2", "--gguf-pre gpt-2");
}

TEST_F(IoGgufExportTest, ImpossibleRequestsAreUserErrors) {
  const std::string in = quoted(kModels / "llama_spm");
  const std::string out = quoted(root_ / "x.gguf");
  // --lora adapter writes a llama.cpp adapter (io_gguf_adapter_export_test): this model has none.
  auto r = ferry("export --format gguf --lora adapter --checkpoint " + in + " --output " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("has no LoRA weights"), std::string::npos) << r.output;
  r = ferry("export --gguf-type q8_0 --checkpoint " + in + " --output " + quoted(root_ / "hf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--gguf-type goes with --format gguf"), std::string::npos) << r.output;
  r = ferry("export --format gguf --gguf-type q4_1 --checkpoint " + in + " --output " + out);  // not a type Ferry writes
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = ferry("export --format gguf --max-shard-size-mb 10 --checkpoint " + in + " --output " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(fs::exists(root_ / "x.gguf"));
}

TEST_F(IoGgufExportTest, BadInputsNameTheFileAndField) {
  const fs::path in = kModels / "llama_spm";
  const auto copy_model = [&](const std::string& name) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    for (const char* file : {"config.json", "model.safetensors"}) fs::copy_file(in / file, dir / file);
    return dir;
  };
  const auto export_error = [&](const fs::path& dir) {
    const auto r = ferry("export --format gguf --checkpoint " + quoted(dir) + " --output " + quoted(dir / "m.gguf"));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_FALSE(fs::exists(dir / "m.gguf"));
    return r.output;
  };

  const fs::path no_tokenizer = copy_model("no_tokenizer");
  EXPECT_NE(export_error(no_tokenizer).find("neither tokenizer.model"), std::string::npos);

  const fs::path truncated = copy_model("truncated_tokenizer");
  std::ifstream source(in / "./tokenizer.model", std::ios::binary);
  std::ostringstream bytes;
  bytes << source.rdbuf();
  std::ofstream(truncated / "./tokenizer.model", std::ios::binary) << bytes.str().substr(0, bytes.str().size() / 3);
  std::string message = export_error(truncated);
  EXPECT_NE(message.find("/tokenizer.model: not a SentencePiece model file"), std::string::npos) << message;

  const fs::path bad_config = copy_model("bad_tokenizer_config");
  fs::copy_file(in / "./tokenizer.model", bad_config / "./tokenizer.model");
  std::ofstream(bad_config / "./tokenizer_config.json") << R"({"add_bos_token": "yes"})";
  message = export_error(bad_config);
  EXPECT_NE(message.find("/tokenizer_config.json: 'add_bos_token' must be true or false"), std::string::npos)
      << message;

  // config.json says 3 layers, the weights hold 2: the missing weight is named.
  const fs::path missing = copy_model("missing_layer");
  fs::copy_file(in / "./tokenizer.model", missing / "./tokenizer.model");
  std::ifstream config_in(in / "config.json");
  std::string config((std::istreambuf_iterator<char>(config_in)), std::istreambuf_iterator<char>());
  const size_t at = config.find("\"num_hidden_layers\": 2");
  ASSERT_NE(at, std::string::npos);
  config.replace(at, 22, "\"num_hidden_layers\": 3");
  std::ofstream(missing / "config.json", std::ios::trunc) << config;
  message = export_error(missing);
  EXPECT_NE(message.find("has no weight 'model.layers.2.input_layernorm.weight'"), std::string::npos) << message;
}

// llama.cpp itself (llama-cpp-python in the deps venv) loads f32 exports: its tokenizer gives the
// source tokenizer's ids, its logits equal transformers' and its greedy tokens transformers' and
// `ferry generate --greedy`'s (SentencePiece llama with llama3 rope; Qwen2 BPE; the LoRA checkpoint
// with biases, linear rope and a Llama 3 tokenizer, compared with its merged Hugging Face export).
// f16, bf16 and q8_0 exports load and give transformers' logits within quantization error.
TEST_F(IoGgufExportTest, LlamaCppRunsTheExport) {
  const auto probe = run_command(std::string("'") + FERRY_PYTHON + "' -c 'import llama_cpp'");
  if (probe.exit_code != 0) {
    GTEST_SKIP() << "[needs llama_cpp] llama-cpp-python is not in the deps venv (scripts/deps.sh installs it)";
  }
  for (const std::string model : {"llama_spm", "qwen2_bpe", "llama_lora_bpe"}) {
    SCOPED_TRACE(model);
    const fs::path file = root_ / (model + ".gguf");
    auto r = ferry("export --format gguf --gguf-type f32 --checkpoint " + quoted(kModels / model) + " --output " +
                   quoted(file));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    fs::path reference = kModels / model;  // what transformers loads
    if (model == "llama_lora_bpe") {       // transformers needs the adapters merged (checked in io_export_test)
      reference = root_ / "merged";
      r = ferry("export --checkpoint " + quoted(kModels / model) + " --output " + quoted(reference));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    fs::path generated = "-";
    if (model == "llama_spm") {  // `ferry generate` reads SentencePiece tokenizers; stdout only: the text
      r = run_command(std::string("'") + FERRY_BINARY + "' generate --model " + quoted(kModels / model) +
                          " --prompt 'the cat' --greedy --max-new-tokens 12",
                      /*with_stderr=*/false);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      generated = root_ / "ferry_greedy.txt";
      std::ofstream(generated) << r.output;
    }
    const auto check =
        python("gguf_llama_cpp_check.py", quoted(reference) + " " + quoted(file) + " " + quoted(generated));
    EXPECT_EQ(check.exit_code, 0) << check.output;
  }
  // The other types load too, with logits within 10% of the largest (quantization error; measured:
  // f16 0.3%, bf16 1-2.4%, q8_0 4.5-5.4%).
  for (const std::string model : {"llama_spm", "qwen2_bpe"}) {
    for (const std::string type : {"f16", "bf16", "q8_0"}) {
      SCOPED_TRACE(model + " " + type);
      const fs::path file = root_ / (model + "_" + type + ".gguf");
      const auto r = ferry("export --format gguf --gguf-type " + type + " --checkpoint " + quoted(kModels / model) +
                           " --output " + quoted(file));
      ASSERT_EQ(r.exit_code, 0) << r.output;
      const auto check =
          python("gguf_llama_cpp_check.py", quoted(kModels / model) + " " + quoted(file) + " - --tolerance 0.1");
      EXPECT_EQ(check.exit_code, 0) << check.output;
    }
  }
}

}  // namespace
