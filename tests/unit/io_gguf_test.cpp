// The pieces of the GGUF export on their own: the writer's bytes against a file assembled here by
// hand from the GGUF v3 specification, Q8_0 blocks and fp16/bf16 rounding against values worked
// out by hand, the SentencePiece model reader on data/tokenizer.model and on broken files, and the
// output-path and naming rules. (Whole exports are checked against gguf-py in
// tests/integration/io_gguf_export_test.cpp.)
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/ggml_quantize.h"
#include "src/io/gguf_adapter_export.h"
#include "src/io/gguf_export.h"
#include "src/io/gguf_writer.h"
#include "src/io/sentencepiece_model.h"

#include <sentencepiece_processor.h>

namespace {

namespace fs = std::filesystem;
using namespace ferry::io;

// Little-endian bytes, written out for the expected file.
struct Bytes {
  std::string s;
  template <class T>
  Bytes& raw(T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Bytes& u32(uint32_t v) { return raw(v); }
  Bytes& u64(uint64_t v) { return raw(v); }
  Bytes& str(const std::string& v) {
    u64(v.size());
    s += v;
    return *this;
  }
  Bytes& pad() {
    while (s.size() % 32 != 0) s.push_back('\0');
    return *this;
  }
};

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("ferry_io_gguf_" + std::to_string(::getpid()) + "_" + name);
}

TEST(GgufWriter, BytesFollowTheSpecification) {
  GgufWriter writer;
  writer.add_string("general.architecture", "llama");
  writer.add_uint32("llama.block_count", 2);
  writer.add_float32("llama.rope.freq_base", 10000.0f);
  writer.add_bool("general.flag", true);
  writer.add_string_array("general.tokens", {"<s>", "a"});
  writer.add_int32_array("general.token_types", {3, -1});
  const at::Tensor matrix = at::arange(6, at::kFloat).reshape({2, 3});  // torch (2, 3): ggml ne [3, 2]
  writer.add_tensor("m.weight", {2, 3}, GgmlType::f32, [&] { return matrix; });
  writer.add_tensor("v.weight", {3}, GgmlType::f16, [] { return at::ones({3}, at::kHalf); });
  EXPECT_EQ(writer.data_bytes(), 32u + 32u);  // 24 bytes and 6 bytes, each padded to 32

  const fs::path file = temp_file("layout.gguf");
  const uint64_t size = writer.write(file);

  Bytes want;
  want.s = "GGUF";
  want.u32(3).u64(2).u64(6);
  want.str("general.architecture").u32(8).str("llama");
  want.str("llama.block_count").u32(4).u32(2);
  want.str("llama.rope.freq_base").u32(6).raw(10000.0f);
  want.str("general.flag").u32(7).raw<uint8_t>(1);
  want.str("general.tokens").u32(9).u32(8).u64(2).str("<s>").str("a");
  want.str("general.token_types").u32(9).u32(5).u64(2).raw<int32_t>(3).raw<int32_t>(-1);
  want.str("m.weight").u32(2).u64(3).u64(2).u32(0).u64(0);
  want.str("v.weight").u32(1).u64(3).u32(1).u64(32);
  want.pad();
  for (int i = 0; i < 6; ++i) want.raw(static_cast<float>(i));
  want.pad();
  for (int i = 0; i < 3; ++i) want.raw<uint16_t>(0x3C00);  // fp16 1.0
  want.pad();

  EXPECT_EQ(size, want.s.size());
  const std::string got = ferry::read_file(file);
  EXPECT_EQ(got.size(), want.s.size());
  EXPECT_TRUE(got == want.s) << "the file differs from the hand-assembled GGUF";
  fs::remove(file);
}

TEST(GgufWriter, WrongProducerSizeLeavesNoFile) {
  GgufWriter writer;
  writer.add_tensor("t", {4}, GgmlType::f32, [] { return at::zeros({3}); });
  const fs::path file = temp_file("wrong.gguf");
  EXPECT_THROW(writer.write(file), ferry::InternalError);
  EXPECT_FALSE(fs::exists(file));
  for (const auto& entry : fs::directory_iterator(file.parent_path())) {
    EXPECT_EQ(entry.path().filename().string().find(file.filename().string() + ".tmp"), std::string::npos);
  }
}

TEST(GgufWriter, KeysAndTensorsAreUnique) {
  GgufWriter writer;
  writer.add_uint32("k", 1);
  EXPECT_THROW(writer.add_uint32("k", 2), ferry::InternalError);
  writer.add_tensor("t", {32}, GgmlType::f32, [] { return at::zeros({32}); });
  EXPECT_THROW(writer.add_tensor("t", {32}, GgmlType::f32, [] { return at::zeros({32}); }), ferry::InternalError);
  EXPECT_THROW(writer.add_tensor("q", {2, 30}, GgmlType::q8_0, [] { return at::zeros({1}); }), ferry::InternalError);
}

// One Q8_0 block worked out by hand: amax 127 -> d = 1 (fp16 0x3C00), q = round(x), halves away from zero.
TEST(GgmlQuantize, Q8_0BlockByHand) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -2.5f;   // -> -3
  x[2] = 2.5f;    // -> 3
  x[3] = 0.49f;   // -> 0
  x[4] = -126.6f; // -> -127
  std::vector<uint8_t> out(34);
  quantize_q8_0(x.data(), 32, out.data());
  uint16_t d;
  std::memcpy(&d, out.data(), 2);
  EXPECT_EQ(d, 0x3C00);
  const auto q = [&](int j) { return static_cast<int8_t>(out[2 + j]); };
  EXPECT_EQ(q(0), 127);
  EXPECT_EQ(q(1), -3);
  EXPECT_EQ(q(2), 3);
  EXPECT_EQ(q(3), 0);
  EXPECT_EQ(q(4), -127);
  EXPECT_EQ(q(31), 0);

  // An all-zero block: d = 0 and every q = 0 (no division by zero).
  std::vector<float> zeros(64, 0.0f);
  std::vector<uint8_t> two(68, 0xff);
  quantize_q8_0(zeros.data(), 64, two.data());
  for (uint8_t byte : two) EXPECT_EQ(byte, 0);

  // Rows are quantized on their own: a (2, 32) tensor is two blocks, 68 bytes.
  const at::Tensor rows = at::stack({at::full({32}, 1.0f), at::full({32}, -2.0f)});
  const at::Tensor packed = to_ggml(rows, GgmlType::q8_0);
  ASSERT_EQ(packed.numel(), 68);
  EXPECT_EQ(static_cast<int8_t>(packed[2].item<uint8_t>()), 127);
  EXPECT_EQ(static_cast<int8_t>(packed[36].item<uint8_t>()), -127);
}

// fp16 / bf16 round to nearest, ties to even (as ggml, numpy and torch do).
TEST(GgmlQuantize, HalfTypesRoundToNearestEven) {
  const at::Tensor x = at::tensor({1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f});
  const at::Tensor f16 = to_ggml(x, GgmlType::f16);
  const auto* h = reinterpret_cast<const uint16_t*>(f16.data_ptr());
  EXPECT_EQ(h[0], 0x3C00);  // tie -> even (1.0)
  EXPECT_EQ(h[1], 0x3C02);  // tie -> even (1 + 2^-9)
  const at::Tensor bf16 = to_ggml(x, GgmlType::bf16);
  const auto* b = reinterpret_cast<const uint16_t*>(bf16.data_ptr());
  EXPECT_EQ(b[2], 0x3F80);  // tie -> even (1.0)
  EXPECT_EQ(b[3], 0x3F82);  // tie -> even (1 + 2^-6)
  // A bf16 source goes through float32 exactly.
  const at::Tensor from_bf16 = to_ggml(at::tensor({3.140625f}).to(at::kBFloat16), GgmlType::f32);
  EXPECT_EQ(from_bf16.item<float>(), 3.140625f);
}

TEST(SentencePieceModel, ReadsTheDemoTokenizer) {
  const SentencePieceModel model = read_sentencepiece_model(fs::path(FERRY_SOURCE_DIR) / "data" / "./tokenizer.model");
  ASSERT_EQ(model.pieces.size(), 2000u);
  EXPECT_EQ(model.pieces[0].piece, "<unk>");
  EXPECT_EQ(model.pieces[0].type, PieceType::unknown);
  EXPECT_EQ(model.pieces[1].piece, "<s>");
  EXPECT_EQ(model.pieces[1].type, PieceType::control);
  EXPECT_EQ(model.pieces[3].piece, "<pad>");
  EXPECT_EQ(model.pieces[5].piece, "<|user|>");
  EXPECT_EQ(model.pieces[5].type, PieceType::user_defined);
  EXPECT_EQ(model.pieces[9].piece, "<0x00>");
  EXPECT_EQ(model.pieces[9].type, PieceType::byte);
  EXPECT_EQ(model.pieces[1999].type, PieceType::normal);
  EXPECT_EQ(model.model_type, 2);  // BPE
  EXPECT_EQ(model.unk_id, 0);
  EXPECT_EQ(model.bos_id, 1);
  EXPECT_EQ(model.eos_id, 2);
  EXPECT_EQ(model.pad_id, 3);
  EXPECT_FALSE(model.add_dummy_prefix);
  EXPECT_FALSE(model.remove_extra_whitespaces);
}

// The sentencepiece library finds BOS / EOS / UNK / PAD by their pieces' text, not by the id fields:
// a written vocabulary that spells them as Gemma does ("<bos>", "<eos>") must name them, or the
// library reports no BOS and generation runs without one.
TEST(SentencePieceModel, WrittenSpecialIdsAreTheLibrarysWhateverTheirSpelling) {
  SentencePieceModel model;
  model.model_type = 2;
  model.pieces = {{"<pad>", 0, PieceType::control}, {"<eos>", 0, PieceType::control}, {"<bos>", 0, PieceType::control},
                  {"<unk>", 0, PieceType::unknown}, {"a", -1, PieceType::normal}, {"b", -2, PieceType::normal}};
  model.pad_id = 0;
  model.eos_id = 1;
  model.bos_id = 2;
  model.unk_id = 3;
  sentencepiece::SentencePieceProcessor processor;
  ASSERT_TRUE(processor.LoadFromSerializedProto(format_sentencepiece_model(model)).ok());
  EXPECT_EQ(processor.bos_id(), 2);
  EXPECT_EQ(processor.eos_id(), 1);
  EXPECT_EQ(processor.unk_id(), 3);
  EXPECT_EQ(processor.pad_id(), 0);
  const SentencePieceModel back = parse_sentencepiece_model(format_sentencepiece_model(model), "written");
  EXPECT_EQ(back.bos_id, 2);
  EXPECT_EQ(back.pieces.size(), model.pieces.size());
}

TEST(SentencePieceModel, BrokenFilesAreInputErrors) {
  const std::string bytes = ferry::read_file(fs::path(FERRY_SOURCE_DIR) / "data" / "./tokenizer.model");
  for (const size_t cut : {size_t{1}, size_t{7}, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE(cut);
    try {
      parse_sentencepiece_model(bytes.substr(0, cut), "cut.model");
      ADD_FAILURE() << "a file cut inside a field parsed";
    } catch (const ferry::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("cut.model: not a SentencePiece model file"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_sentencepiece_model("", "empty.model"), ferry::InputError);
  EXPECT_THROW(parse_sentencepiece_model("{\"model\": 1}", "json.model"), ferry::InputError);
}

TEST(GgufExport, OutputFileAndDefaultName) {
  EXPECT_EQ(gguf_output_file("out/model-q8.gguf"), fs::path("out/model-q8.gguf"));
  EXPECT_EQ(gguf_output_file("out/folder"), fs::path("out/folder/model.gguf"));
  EXPECT_EQ(default_gguf_name("runs/demo/final"), "demo-final");
  EXPECT_EQ(default_gguf_name("runs/demo/step-200/"), "demo-step-200");
  EXPECT_EQ(default_gguf_name("models/TinyLlama-1.1B"), "TinyLlama-1.1B");
  EXPECT_EQ(default_gguf_name("."), fs::current_path().filename().string());
  EXPECT_EQ(parse_gguf_file_type("q8_0"), GgufFileType::q8_0);
  EXPECT_EQ(parse_gguf_file_type("q4_k_m"), GgufFileType::q4_k_m);
  EXPECT_EQ(gguf_file_type_id(GgufFileType::q4_k_m), 15u);  // llama.h's LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_THROW(parse_gguf_file_type("q4_1"), ferry::UserError);
  EXPECT_EQ(gguf_adapter_output_file("out/lora.gguf"), fs::path("out/lora.gguf"));
  EXPECT_EQ(gguf_adapter_output_file("out/folder"), fs::path("out/folder/adapter.gguf"));
}

// llama.cpp's q/k row order, worked out by hand: 2 groups (heads) of 4 rows (head_dim 4), each
// head's rotate-half halves [0 1 | 2 3] interleaved as pairs (0, 2), (1, 3).
TEST(GgufExport, RowPermutationInterleavesEachHeadsHalves) {
  const at::Tensor rows = at::arange(8, at::kFloat).reshape({8, 1}).repeat({1, 3});  // row i holds i
  const at::Tensor permuted = permute_gguf_rows(rows, 2);
  const std::vector<float> want{0, 2, 1, 3, 4, 6, 5, 7};
  ASSERT_EQ(permuted.sizes(), rows.sizes());
  for (int64_t i = 0; i < 8; ++i) {
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(permuted[i][j].item<float>(), want[i]) << i << ", " << j;
  }
  const at::Tensor bias = permute_gguf_rows(at::arange(8, at::kFloat), 1);  // one KV head of head_dim 8
  const std::vector<float> want_bias{0, 4, 1, 5, 2, 6, 3, 7};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(bias[i].item<float>(), want_bias[i]) << i;
  EXPECT_EQ(gguf_tensor_type(GgufFileType::q8_0, {64, 4}), GgmlType::f16);  // a rank-4 lora_b row
  EXPECT_EQ(gguf_tensor_type(GgufFileType::q8_0, {4, 64}), GgmlType::q8_0);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::bf16, {64}), GgmlType::f32);
}

}  // namespace
