// The GGUF reader on files gguf-py wrote (the fuzz seeds tests/fuzz/corpus/gguf/*.gguf): what it
// reads, and that a truncated or bit-flipped file is an InputError naming the file and the field,
// never a crash or garbage.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/gguf_file.h"
#include "src/io/gguf_model.h"
#include "tests/support/scratch_dir.h"

namespace ferry::io {
namespace {
namespace fs = std::filesystem;

const fs::path kSeed = fs::path(FERRY_SOURCE_DIR) / "tests/fuzz/corpus/gguf/qwen2_bpe.gguf";

fs::path write_bytes(const std::string& name, const std::string& bytes) {
  static const fs::path dir = [] {
    const fs::path made = test_support::process_scratch_dir("io_gguf_file_test");
    fs::create_directories(made);
    return made;
  }();
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(fs::file_size(path), bytes.size());
  return path;
}

// The InputError message for `bytes`, or "" when the file opens.
std::string open_error(const std::string& bytes) {
  const fs::path path = write_bytes("broken.gguf", bytes);
  try {
    GgufWeights weights(GgufFile::open(path));
    for (const auto& name : weights.names()) (void)weights.load(name);
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    return message;
  }
  return "";
}

template <class T>
void put(std::string& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

TEST(GgufFile, ReadsWhatGgufPyWrote) {
  const GgufFile file = GgufFile::open(kSeed);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(file.get_int("qwen2.embedding_length"), 32);
  EXPECT_NEAR(file.get_float("qwen2.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
  EXPECT_EQ(file.get_strings("tokenizer.ggml.tokens").size(), 8u);
  EXPECT_EQ(file.get_strings("tokenizer.ggml.merges")[1], "Ġ a");
  const GgufTensorInfo* q = file.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::q5_0);
  EXPECT_EQ(q->shape(), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(q->nbytes, 32u * 32 / 32 * 22);
  EXPECT_EQ(file.get_int("qwen2.missing", 7), 7);
  EXPECT_THROW(file.get_int("tokenizer.ggml.model"), InputError);  // a string
  EXPECT_THROW(file.get_string("qwen2.missing"), InputError);
}

TEST(GgufFile, GgufWeightsServeHuggingFaceNames) {
  const GgufWeights weights(GgufFile::open(kSeed));
  EXPECT_EQ(weights.config().model_type, "qwen2");
  EXPECT_TRUE(weights.config().tie_word_embeddings);
  EXPECT_TRUE(weights.contains("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(weights.contains("lm_head.weight"));
  EXPECT_EQ(weights.info("model.embed_tokens.weight").shape, (std::vector<int64_t>{8, 32}));
}

TEST(GgufFile, EveryTruncationIsAnInputError) {
  const std::string bytes = read_file(kSeed);
  for (size_t size = 0; size < bytes.size(); size += (size < 4096 ? 7 : 509)) {
    const std::string message = open_error(bytes.substr(0, size));
    EXPECT_FALSE(message.empty()) << "a file cut to " << size << " bytes opened";
  }
}

TEST(GgufFile, BadHeaderFieldsAreNamed) {
  const std::string bytes = read_file(kSeed);
  std::string bad = bytes;
  bad[0] = 'X';
  EXPECT_NE(open_error(bad).find("not a GGUF file"), std::string::npos);
  bad = bytes;
  put<uint32_t>(bad, 4, 1);
  EXPECT_NE(open_error(bad).find("version 1"), std::string::npos);
  bad = bytes;
  put<uint64_t>(bad, 8, uint64_t{1} << 40);
  EXPECT_NE(open_error(bad).find("tensor count"), std::string::npos);
  bad = bytes;
  put<uint64_t>(bad, 16, uint64_t{1} << 40);
  EXPECT_NE(open_error(bad).find("metadata count"), std::string::npos);
}

TEST(GgufFile, BadTensorEntriesAreNamed) {
  const std::string bytes = read_file(kSeed);
  const GgufFile file = GgufFile::open(kSeed);
  const GgufTensorInfo& tensor = *file.find_tensor("blk.0.attn_k.weight");
  // The entry: u64 name length, name, u32 rank, u64 ne[rank], u32 type, u64 offset.
  const size_t rank_at = tensor.info_offset + 8 + tensor.name.size();
  const size_t type_at = rank_at + 4 + 8 * tensor.ne.size();
  std::string bad = bytes;
  put<uint32_t>(bad, type_at, 23);  // IQ4_XS
  std::string message = open_error(bad);
  EXPECT_NE(message.find("'blk.0.attn_k.weight' has ggml type type 23"), std::string::npos) << message;
  EXPECT_NE(message.find("Q4_K"), std::string::npos) << message;  // lists what Ferry reads
  bad = bytes;
  put<uint64_t>(bad, type_at + 4, tensor.offset + 1);
  EXPECT_NE(open_error(bad).find("alignment"), std::string::npos);
  bad = bytes;
  put<uint64_t>(bad, type_at + 4, uint64_t{1} << 40);
  EXPECT_NE(open_error(bad).find("runs past the end"), std::string::npos);
  bad = bytes;
  put<uint32_t>(bad, rank_at, 9);
  EXPECT_NE(open_error(bad).find("rank 9"), std::string::npos);
  bad = bytes;
  put<uint64_t>(bad, rank_at + 4, 3);  // a row of 3 values is not whole Q5_1 blocks
  EXPECT_NE(open_error(bad).find("blocks"), std::string::npos);
  bad = bytes;
  put<uint64_t>(bad, rank_at + 4 + 8, 2);  // fewer rows than the config: the shape check names it
  message = open_error(bad);
  EXPECT_NE(message.find("blk.0.attn_k.weight"), std::string::npos) << message;
}

TEST(GgufFile, EverySingleByteFlipOfTheHeaderIsHandled) {
  const std::string bytes = read_file(kSeed);
  const size_t header = GgufFile::open(kSeed).data_offset();
  int errors = 0;
  for (size_t at = 0; at < header; at += 3) {  // every third byte: a minute of file writes otherwise
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    if (!open_error(bad).empty()) ++errors;  // or it opened: a flip inside a name or a value
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace ferry::io
