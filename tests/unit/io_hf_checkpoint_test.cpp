// Hugging Face weight folders: single file, sharded (index + shards), and the errors for a missing
// shard, a tensor the index lists but its shard lacks, and a folder without weights.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "src/io/hf_checkpoint.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

class IoHfCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ferry_io_hf_checkpoint_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    // 4 tensors of 64, 64, 96 and 32 bytes.
    tensors_["a.weight"] = at::arange(16, at::kFloat);
    tensors_["b.weight"] = at::arange(32, at::kBFloat16);
    tensors_["c.weight"] = at::arange(24, at::kFloat).reshape({4, 6});
    tensors_["d.bias"] = at::arange(4, at::kLong);
  }
  void TearDown() override {
    fs::remove_all(dir_);
  }

  void expect_same(const TensorMap& got) {
    ASSERT_EQ(got.size(), tensors_.size());
    for (const auto& [name, expected] : tensors_) {
      EXPECT_EQ(got.at(name).scalar_type(), expected.scalar_type()) << name;
      EXPECT_TRUE(at::equal(got.at(name), expected)) << name;
    }
  }

  static nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(std::ifstream(path)); }

  std::string error_of() {
    try {
      load_hf_weights(dir_);
    } catch (const InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no InputError";
    return "";
  }

  fs::path dir_;
  TensorMap tensors_;
};

TEST_F(IoHfCheckpointTest, ShardFileNames) {
  EXPECT_EQ(hf_shard_file_name(2, 5), "model-00002-of-00005.safetensors");
  EXPECT_EQ(hf_shard_file_name(12, 123), "model-00012-of-00123.safetensors");
}

TEST_F(IoHfCheckpointTest, SingleFile) {
  save_hf_weights(dir_, tensors_);
  EXPECT_TRUE(fs::exists(dir_ / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors.index.json"));
  expect_same(load_hf_weights(dir_));
  // Everything fits in one shard: still a single file, as transformers does.
  save_hf_weights(dir_, tensors_, 1 << 20);
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors.index.json"));
}

TEST_F(IoHfCheckpointTest, ShardedGreedyBySize) {
  save_hf_weights(dir_, tensors_, 128);
  // a(64)+b(64) = 128 fits; c(96) starts shard 2; d(32) fits with c.
  const auto index = read_json(dir_ / "model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"], 256);
  EXPECT_EQ(index["weight_map"]["a.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["b.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["c.weight"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["d.bias"], "model-00002-of-00002.safetensors");
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors"));
  expect_same(load_hf_weights(dir_));

  const HfWeights weights(dir_);
  EXPECT_EQ(weights.files().size(), 2u);
  EXPECT_EQ(weights.names(), (std::vector<std::string>{"a.weight", "b.weight", "c.weight", "d.bias"}));
  EXPECT_EQ(weights.info("c.weight").shape, (std::vector<int64_t>{4, 6}));
  EXPECT_TRUE(at::equal(weights.tensor("c.weight"), tensors_["c.weight"]));
}

TEST_F(IoHfCheckpointTest, OversizedTensorGetsItsOwnShardAndResavingCleansUp) {
  save_hf_weights(dir_, tensors_, 50);  // every tensor but d exceeds 50 bytes
  EXPECT_TRUE(fs::exists(dir_ / "model-00004-of-00004.safetensors"));
  expect_same(load_hf_weights(dir_));
  save_hf_weights(dir_, tensors_, 128);
  EXPECT_FALSE(fs::exists(dir_ / "model-00004-of-00004.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "model-00002-of-00002.safetensors"));
  save_hf_weights(dir_, tensors_);
  EXPECT_FALSE(fs::exists(dir_ / "model-00002-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors.index.json"));
  expect_same(load_hf_weights(dir_));
}

// Weights that are links: inside the folder, or a Hugging Face cache snapshot's blob, are read;
// a link to anywhere else is refused, naming the link and its target.
TEST_F(IoHfCheckpointTest, LinksOutsideTheFolderAreRefused) {
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere);
  save_safetensors(elsewhere / "weights.safetensors", tensors_);
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  fs::create_symlink(elsewhere / "weights.safetensors", model / kHfWeightsFile);
  try {
    load_hf_weights(model);
    ADD_FAILURE() << "a link out of the folder was followed";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find((model / kHfWeightsFile).string() + "' is a link to '" +
                           (elsewhere / "weights.safetensors").string() + "', outside the model folder"),
              std::string::npos) << message;
  }
  // A link inside the folder is fine.
  fs::create_directories(model / "store");
  fs::rename(elsewhere / "weights.safetensors", model / "store" / "weights.safetensors");
  fs::remove(model / kHfWeightsFile);
  fs::create_symlink("store/weights.safetensors", model / kHfWeightsFile);
  expect_same(load_hf_weights(model));
  // The hub cache: models--x/snapshots/<rev>/model.safetensors -> ../../blobs/<hash>.
  const fs::path repo = dir_ / "models--org--name";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / "abc123");
  fs::rename(model / "store" / "weights.safetensors", repo / "blobs" / "0f3e");
  fs::create_symlink("../../blobs/0f3e", repo / "snapshots" / "abc123" / kHfWeightsFile);
  expect_same(load_hf_weights(repo / "snapshots" / "abc123"));
}

TEST_F(IoHfCheckpointTest, MissingShard) {
  save_hf_weights(dir_, tensors_, 128);
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  const auto message = error_of();
  EXPECT_NE(message.find("lists shard 'model-00002-of-00002.safetensors'"), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
}

TEST_F(IoHfCheckpointTest, TensorListedButAbsent) {
  save_hf_weights(dir_, tensors_, 128);
  auto index = read_json(dir_ / "model.safetensors.index.json");
  index["weight_map"]["e.weight"] = "model-00001-of-00002.safetensors";
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  const auto message = error_of();
  EXPECT_NE(message.find("tensor 'e.weight' is in 'model-00001-of-00002.safetensors'"), std::string::npos) << message;
}

TEST_F(IoHfCheckpointTest, BadIndexAndEmptyFolder) {
  EXPECT_NE(error_of().find("has neither model.safetensors nor model.safetensors.index.json"), std::string::npos);
  std::ofstream(dir_ / "pytorch_model.bin") << "x";
  EXPECT_NE(error_of().find("PyTorch .bin"), std::string::npos);
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": 3}";
  EXPECT_NE(error_of().find("no \"weight_map\" object"), std::string::npos);
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"weight_map": {"a": "../../etc/passwd"}})";
  EXPECT_NE(error_of().find("outside the model folder"), std::string::npos);
  std::ofstream(dir_ / "model.safetensors.index.json") << "{";
  EXPECT_NE(error_of().find("not valid JSON"), std::string::npos);
  EXPECT_THROW(load_hf_weights(dir_ / "nope"), InputError);
}

}  // namespace
}  // namespace ferry::io
