// Safetensors reader/writer: round trips of every dtype, and a clear InputError (never a crash)
// for each way a file can be corrupt. Corrupt files are written byte by byte here, independently
// of the writer under test.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/io/safetensors.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

class IoSafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ferry_io_safetensors_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
  }

  // A file made of an 8-byte little-endian header length, the header text and the data bytes.
  fs::path write_raw(const std::string& header, const std::string& data, uint64_t declared_length = UINT64_MAX) {
    const fs::path path = dir_ / "model.safetensors";
    std::ofstream out(path, std::ios::binary);
    const uint64_t length = declared_length == UINT64_MAX ? header.size() : declared_length;
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(length >> (8 * i));
    out.write(reinterpret_cast<const char*>(bytes), 8);
    out << header << data;
    return path;
  }

  // The InputError message `load_safetensors` gives for `path`; fails the test if it does not throw one.
  static std::string load_error(const fs::path& path) {
    try {
      load_safetensors(path);
    } catch (const InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no InputError for " << path;
    return "";
  }

  fs::path dir_;
};

TEST_F(IoSafetensorsTest, RoundTripsEveryDtype) {
  TensorMap tensors;
  const auto base = at::arange(-6, 6, at::kDouble).reshape({3, 4}) * 1.25;
  for (auto dtype : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort, at::kChar}) {
    tensors[std::string("t_") + c10::toString(dtype)] = base.to(dtype);
  }
  tensors["t_u8"] = at::arange(0, 250, 7, at::kLong).to(at::kByte);
  tensors["t_bool"] = at::tensor({1, 0, 0, 1, 1}, at::kLong).to(at::kBool);
  tensors["t_f8e4m3"] = base.to(at::ScalarType::Float8_e4m3fn);
  tensors["t_f8e5m2"] = base.to(at::ScalarType::Float8_e5m2);
  tensors["t_noncontiguous"] = base.t().to(at::kFloat);
  const auto path = dir_ / "all.safetensors";
  save_safetensors(path, tensors, {{"note", "hello"}});

  const TensorMap loaded = load_safetensors(path);
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, expected] : tensors) {
    SCOPED_TRACE(name);
    const at::Tensor& got = loaded.at(name);
    EXPECT_EQ(got.scalar_type(), expected.scalar_type());
    EXPECT_EQ(got.sizes(), expected.sizes());
    EXPECT_TRUE(got.is_contiguous());
    // Byte-exact comparison: equal() is not defined for every dtype (float8).
    const auto a = expected.contiguous().view(at::kByte);
    const auto b = got.view(at::kByte);
    EXPECT_TRUE(at::equal(a, b));
  }
  const SafetensorsFile file(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "hello");
  EXPECT_EQ(file.data_offset() % 8, 0u);
  EXPECT_EQ(file.names().front(), "t_BFloat16");
}

TEST_F(IoSafetensorsTest, EmptyTensorAndScalar) {
  TensorMap tensors{{"empty", at::zeros({0, 3}, at::kFloat)}, {"scalar", at::scalar_tensor(2.5, at::kFloat)}};
  const auto path = dir_ / "x.safetensors";
  save_safetensors(path, tensors);
  const TensorMap loaded = load_safetensors(path);
  EXPECT_EQ(loaded.at("empty").sizes(), at::IntArrayRef({0, 3}));
  EXPECT_EQ(loaded.at("scalar").dim(), 0);
  EXPECT_EQ(loaded.at("scalar").item<float>(), 2.5f);
}

TEST_F(IoSafetensorsTest, HandWrittenFileReadsAsExpected) {
  // Two F32 values then one I16; header not padded (valid, as older writers produce).
  float floats[2] = {1.5f, -2.0f};
  int16_t shorts[1] = {-7};
  std::string data(reinterpret_cast<const char*>(floats), 8);
  data.append(reinterpret_cast<const char*>(shorts), 2);
  const auto path = write_raw(
      R"({"b":{"dtype":"I16","shape":[1],"data_offsets":[8,10]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}})",
      data);
  const SafetensorsFile file(path);
  EXPECT_EQ(file.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(file.info("b").dtype, at::kShort);
  const at::Tensor a = file.tensor("a");  // zero-copy or copy, same values
  EXPECT_EQ(a[0].item<float>(), 1.5f);
  EXPECT_EQ(a[1].item<float>(), -2.0f);
  EXPECT_EQ(file.tensor("b")[0].item<int16_t>(), -7);
  EXPECT_EQ(file.metadata().at("k"), "v");
  EXPECT_THROW(file.info("missing"), InputError);
}

TEST_F(IoSafetensorsTest, ViewOutlivesTheFileObject) {
  const auto path = dir_ / "v.safetensors";
  save_safetensors(path, {{"w", at::arange(16, at::kFloat)}});
  at::Tensor view;
  {
    const SafetensorsFile file(path);
    view = file.tensor("w");
  }
  fs::remove(path);  // the mapping keeps the bytes
  EXPECT_TRUE(at::equal(view, at::arange(16, at::kFloat)));
  view.add_(1);  // copy-on-write page, must not crash
  EXPECT_EQ(view[3].item<float>(), 4.0f);
}

TEST_F(IoSafetensorsTest, SaveIsAtomicAndOverwrites) {
  const auto path = dir_ / "o.safetensors";
  save_safetensors(path, {{"w", at::ones({2}, at::kFloat)}});
  save_safetensors(path, {{"w", at::zeros({3}, at::kFloat)}});
  EXPECT_EQ(load_safetensors(path).at("w").numel(), 3);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary left behind
}

TEST_F(IoSafetensorsTest, RejectsUnstorableDtype) {
  EXPECT_THROW(save_safetensors(dir_ / "c.safetensors", {{"c", at::zeros({2}, at::kComplexFloat)}}), InputError);
  EXPECT_FALSE(fs::exists(dir_ / "c.safetensors"));
}

const char* kOneTensor = R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";

TEST_F(IoSafetensorsTest, TruncatedData) {
  const auto message = load_error(write_raw(kOneTensor, std::string(10, '\0')));
  EXPECT_NE(message.find("model.safetensors: tensor 'x' data_offsets [0, 16] exceed the data section (10 bytes)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
}

TEST_F(IoSafetensorsTest, FileShorterThanLengthField) {
  const fs::path path = dir_ / "short.safetensors";
  std::ofstream(path, std::ios::binary) << "abc";
  EXPECT_NE(load_error(path).find("too short"), std::string::npos);
  std::ofstream(path, std::ios::binary).flush();  // empty file
  EXPECT_NE(load_error(path).find("0 bytes"), std::string::npos);
}

TEST_F(IoSafetensorsTest, HeaderLengthPastEndOfFile) {
  const auto message = load_error(write_raw(kOneTensor, std::string(16, '\0'), 1000));
  EXPECT_NE(message.find("header length 1000 exceeds the file"), std::string::npos) << message;
  const auto huge = load_error(write_raw(kOneTensor, "", UINT64_MAX - 3));
  EXPECT_NE(huge.find("exceeds the file"), std::string::npos) << huge;
}

TEST_F(IoSafetensorsTest, HeaderNotJson) {
  EXPECT_NE(load_error(write_raw("{\"x\": [1, 2", "")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(load_error(write_raw("\x89PNG\r\n\x1a\n garbage", "")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(load_error(write_raw("[1, 2]", "")).find("not a JSON object"), std::string::npos);
}

TEST_F(IoSafetensorsTest, MissingFields) {
  EXPECT_NE(load_error(write_raw(R"({"x":{"shape":[4],"data_offsets":[0,16]}})", std::string(16, '\0'))).find("no \"dtype\""),
            std::string::npos);
  EXPECT_NE(load_error(write_raw(R"({"x":{"dtype":"F32","data_offsets":[0,16]}})", std::string(16, '\0'))).find("no \"shape\""),
            std::string::npos);
  EXPECT_NE(load_error(write_raw(R"({"x":{"dtype":"F32","shape":[4]}})", std::string(16, '\0'))).find("data_offsets"),
            std::string::npos);
  EXPECT_NE(load_error(write_raw(R"({"x":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", std::string(16, '\0')))
                .find("non-negative"),
            std::string::npos);
  EXPECT_NE(load_error(write_raw(R"({"x":7})", "")).find("not a JSON object"), std::string::npos);
  EXPECT_NE(load_error(write_raw(R"({"__metadata__":{"a":1}})", "")).find("'a' is not a string"), std::string::npos);
}

TEST_F(IoSafetensorsTest, OverlappingOffsets) {
  const auto message = load_error(write_raw(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
      std::string(16, '\0')));
  EXPECT_NE(message.find("tensor 'b' data_offsets [8, 16] overlap tensor 'a'"), std::string::npos) << message;
}

TEST_F(IoSafetensorsTest, GapBetweenTensors) {
  const auto message = load_error(write_raw(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
      std::string(20, '\0')));
  EXPECT_NE(message.find("4 unused bytes before tensor 'b'"), std::string::npos) << message;
}

TEST_F(IoSafetensorsTest, TrailingBytes) {
  const auto message = load_error(write_raw(kOneTensor, std::string(20, '\0')));
  EXPECT_NE(message.find("4 bytes after the last tensor"), std::string::npos) << message;
}

TEST_F(IoSafetensorsTest, WrongDtypeSize) {
  const auto message =
      load_error(write_raw(R"({"x":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})", std::string(16, '\0')));
  EXPECT_NE(message.find("tensor 'x' has dtype F16 and shape [4]"), std::string::npos) << message;
  EXPECT_NE(message.find("span 16 bytes"), std::string::npos) << message;
  const auto overflow = load_error(write_raw(
      R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,16]}})", std::string(16, '\0')));
  EXPECT_NE(overflow.find("impossibly large"), std::string::npos) << overflow;
}

TEST_F(IoSafetensorsTest, UnknownDtype) {
  const auto message =
      load_error(write_raw(R"({"x":{"dtype":"Q4_K","shape":[4],"data_offsets":[0,16]}})", std::string(16, '\0')));
  EXPECT_NE(message.find("dtype 'Q4_K', which Ferry cannot read"), std::string::npos) << message;
  EXPECT_NE(message.find("BF16"), std::string::npos) << message;
}

TEST_F(IoSafetensorsTest, OffsetsOutOfOrder) {
  const auto message =
      load_error(write_raw(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", std::string(16, '\0')));
  EXPECT_NE(message.find("data_offsets [16, 0] out of order"), std::string::npos) << message;
}

// Every prefix of a valid file, and every single-byte change of its header and length field: the
// reader either loads it or throws InputError; it never crashes or reads out of bounds.
TEST_F(IoSafetensorsTest, NeverCrashesOnDamagedFiles) {
  const auto path = dir_ / "good.safetensors";
  save_safetensors(path, {{"a", at::arange(6, at::kFloat)}, {"b", at::ones({2, 2}, at::kBFloat16)}, {"c", at::zeros({0})}});
  std::string good;
  {
    std::ifstream in(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint64_t header_size = 0;
  std::memcpy(&header_size, good.data(), 8);
  const auto damaged = dir_ / "damaged.safetensors";
  const auto outcome = [&](const std::string& bytes) {
    std::ofstream(damaged, std::ios::binary | std::ios::trunc) << bytes;
    try {
      load_safetensors(damaged);
      return 0;
    } catch (const InputError&) {
      return 1;
    }
  };
  for (size_t length = 0; length < good.size(); ++length) {
    EXPECT_EQ(outcome(good.substr(0, length)), 1) << "prefix of " << length << " bytes loaded";
  }
  int rejected = 0;
  for (size_t i = 0; i < 8 + header_size; ++i) {
    for (const unsigned char delta : {1, 0x20, 0x80}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]) ^ delta);
      rejected += outcome(bytes);  // must not crash; most changes are caught
    }
  }
  EXPECT_GT(rejected, static_cast<int>(header_size));
}

TEST_F(IoSafetensorsTest, MissingFileNamesIt) {
  const auto message = load_error(dir_ / "nope.safetensors");
  EXPECT_NE(message.find("nope.safetensors"), std::string::npos) << message;
}

}  // namespace
}  // namespace ferry::io
