// Models from the local Hugging Face hub cache (src/io/hf_hub_cache.h, model_path.h): `model.path:
// ORG/NAME` resolves to the snapshot refs/main names (else the newest), offline; a name the cache
// does not hold is an InputError saying where Ferry looked and what the cache has. The tree is laid
// out as huggingface_hub lays it out (HF_HUB_CACHE, HF_HOME/hub).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "src/io/hf_hub_cache.h"
#include "src/io/model_path.h"

namespace ferry::io {
namespace {
namespace fs = std::filesystem;

class HubCache : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("hub_cache_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "hub");
    ::setenv("HF_HUB_CACHE", (root_ / "hub").string().c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("HF_HUB_CACHE");
    ::unsetenv("HF_HOME");
    fs::remove_all(root_);
  }
  fs::path snapshot(const std::string& repo, const std::string& revision) {
    const fs::path path = root_ / "hub" / repo / "snapshots" / revision;
    fs::create_directories(path);
    std::ofstream(path / "config.json") << "{}";
    return path;
  }
  fs::path root_;
};

TEST_F(HubCache, ModelNameResolvesToRefsMainSnapshot) {
  const fs::path old_one = snapshot("models--acme--tiny", "aaa");
  snapshot("models--acme--tiny", "bbb");
  fs::create_directories(root_ / "hub" / "models--acme--tiny" / "refs");
  std::ofstream(root_ / "hub" / "models--acme--tiny" / "refs" / "main") << "aaa\n";
  EXPECT_EQ(resolve_model_path("acme/tiny"), old_one);
}

TEST_F(HubCache, WithoutRefsTheNewestSnapshotIsTaken) {
  snapshot("models--acme--tiny", "aaa");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const fs::path newer = snapshot("models--acme--tiny", "bbb");
  EXPECT_EQ(resolve_model_path("acme/tiny"), newer);
}

TEST_F(HubCache, HfHomeIsHonoured) {
  ::unsetenv("HF_HUB_CACHE");
  ::setenv("HF_HOME", root_.string().c_str(), 1);
  EXPECT_EQ(hub_cache_root(), root_ / "hub");
  const fs::path path = snapshot("models--acme--tiny", "aaa");
  EXPECT_EQ(resolve_model_path("acme/tiny"), path);
}

TEST_F(HubCache, MissingModelSaysWhereItLookedAndWhatIsThere) {
  snapshot("models--acme--tiny", "aaa");
  try {
    resolve_model_path("acme/huge");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find((root_ / "hub" / "models--acme--huge").string()), std::string::npos) << message;
    EXPECT_NE(message.find("acme/tiny"), std::string::npos) << message;
  }
}

TEST_F(HubCache, ExistingFoldersAndOtherPathsAreNotCacheNames) {
  EXPECT_FALSE(looks_like_hub_repo_id("runs/sft/final"));
  EXPECT_FALSE(looks_like_hub_repo_id("model.gguf"));
  EXPECT_TRUE(looks_like_hub_repo_id("Qwen/Qwen2.5-0.5B-Instruct"));
  fs::create_directories(root_ / "local" / "model");
  const fs::path cwd = fs::current_path();
  fs::current_path(root_);
  EXPECT_EQ(resolve_model_path("local/model"), fs::path("local/model"));  // a folder here wins
  fs::current_path(cwd);
}

}  // namespace
}  // namespace ferry::io
