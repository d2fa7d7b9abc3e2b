// `ferry export` as a user runs it, on model folders written by transformers: transformers must
// load the exported folder and give exactly the same weights and logits (io_safetensors_check.py),
// single-file and re-sharded, and back again; Qwen3 and Mistral folders stay Qwen3 and Mistral;
// tokenizer/generation files come along; impossible requests are user errors (exit 2) with a message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

Result run(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

Result ferry(const std::string& args) { return run(std::string("'") + FERRY_BINARY + "' " + args); }

Result checker(const std::string& args) {
  return run(std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
             "/tests/parity/io_safetensors_check.py' " + args);
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

int count_shards(const fs::path& dir) {
  int shards = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    shards += name.rfind("model-", 0) == 0 && entry.path().extension() == ".safetensors";
  }
  return shards;
}

// Input models written by transformers (tests/parity/io_export_ref.py, run once as a fixture).
const fs::path kModels = fs::path(FERRY_FIXTURES_DIR) / "io_export";

class IoExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kModels / "llama_f32" / "config.json"))
        << "missing fixture " << kModels << " (run the parity_fixture_io_export test first)";
    root_ = fs::temp_directory_path() / ("ferry_io_export_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(root_);  // keep the files to inspect a failure
  }
  fs::path root_;
};

TEST_F(IoExportTest, SingleFileExportGivesTheSameModel) {
  const fs::path in = kModels / "llama_f32";
  const fs::path out = root_ / "single";
  const Result r = ferry("export --checkpoint '" + in.string() + "' --output '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("in 1 file"), std::string::npos) << r.output;
  const Result check = checker("model '" + in.string() + "' '" + out.string() + "' --shards 1");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  for (const char* file : {"tokenizer.model", "tokenizer_config.json", "generation_config.json"}) {
    ASSERT_TRUE(fs::exists(out / file)) << file;
    EXPECT_EQ(bytes_of(out / file), bytes_of(in / file)) << file;
  }
}

TEST_F(IoExportTest, ShardedExportRoundTrips) {
  const fs::path in = kModels / "llama_f32";  // 3.1 MiB of weights: >= 3 shards of 1 MiB
  const fs::path sharded = root_ / "sharded";
  Result r = ferry("export --checkpoint '" + in.string() + "' --output '" + sharded.string() + "' --max-shard-size-mb 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const int shards = count_shards(sharded);
  EXPECT_GE(shards, 3);
  for (const auto& entry : fs::directory_iterator(sharded)) {
    if (entry.path().extension() == ".safetensors") {
      EXPECT_LE(fs::file_size(entry.path()), (1u << 20) + 4096) << entry.path();
    }
  }
  Result check = checker("model '" + in.string() + "' '" + sharded.string() + "' --shards " + std::to_string(shards));
  EXPECT_EQ(check.exit_code, 0) << check.output;

  // And back: the sharded export is itself a valid input.
  const fs::path back = root_ / "back";
  r = ferry("export --checkpoint '" + sharded.string() + "' --output '" + back.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  check = checker("model '" + in.string() + "' '" + back.string() + "' --shards 1");
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST_F(IoExportTest, TiedBf16ModelWithBiases) {
  const fs::path in = kModels / "tied_bf16";
  const fs::path out = root_ / "tied_out";
  const Result r = ferry("export --checkpoint '" + in.string() + "' --output '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Result check = checker("model '" + in.string() + "' '" + out.string() + "' --shards 1");
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// Qwen3 (q_norm / k_norm weights, head_dim != hidden/heads) and Mistral (sliding_window 6, shorter
// than the checker's 8-token input, so the window changes its logits) go out as themselves.
TEST_F(IoExportTest, Qwen3AndMistralKeepTheirArchitecture) {
  for (const auto& [name, architecture] : {std::pair<std::string, std::string>{"qwen3", "Qwen3ForCausalLM"},
                                            std::pair<std::string, std::string>{"mistral", "MistralForCausalLM"}}) {
    SCOPED_TRACE(name);
    const fs::path in = kModels / name;
    const fs::path out = root_ / name;
    const Result r = ferry("export --checkpoint '" + in.string() + "' --output '" + out.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Result check = checker("model '" + in.string() + "' '" + out.string() + "' --shards 1");
    EXPECT_EQ(check.exit_code, 0) << check.output;
    EXPECT_NE(bytes_of(out / "config.json").find("\"" + architecture + "\""), std::string::npos);
  }
}

TEST_F(IoExportTest, ImpossibleRequestsAreUserErrors) {
  const fs::path in = kModels / "tied_bf16";
  Result r = ferry("export --checkpoint '" + in.string() + "' --output '" + (root_ / "x").string() + "' --lora adapter");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no LoRA weights"), std::string::npos) << r.output;
  r = ferry("export --checkpoint '" + in.string() + "' --output '" + in.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is the checkpoint folder itself"), std::string::npos) << r.output;
  r = ferry("export --checkpoint '" + (root_ / "missing").string() + "' --output '" + (root_ / "x").string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  r = ferry("export --checkpoint '" + in.string() + "' --output '" + (root_ / "x").string() + "' --max-shard-size-mb -3");
  EXPECT_EQ(r.exit_code, 2) << r.output;

  // A truncated weight file: a clear input error, not a crash.
  const fs::path broken = root_ / "broken";
  fs::create_directories(broken);
  fs::copy_file(in / "config.json", broken / "config.json");
  const std::string weights = bytes_of(in / "model.safetensors");
  std::ofstream(broken / "model.safetensors", std::ios::binary) << weights.substr(0, weights.size() / 2);
  r = ferry("export --checkpoint '" + broken.string() + "' --output '" + (root_ / "y").string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
}

}  // namespace
