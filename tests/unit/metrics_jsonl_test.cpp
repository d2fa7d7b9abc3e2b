// metrics.jsonl: exact line text (key order, NaN/inf as null), appending across writers, and the
// resume truncation that drops rows a crashed run wrote after its last checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/file_util.h"
#include "src/metrics/metrics_jsonl.h"
#include "tests/unit/metrics_temp_dir.h"

namespace ferry {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(MetricsJsonl, LineKeepsKeyOrder) {
  const MetricsRow row{12, {{"loss", 2.3125}, {"lr", 2e-5}, {"grad_norm", 0.81}, {"tokens_per_s", 5120.0}}};
  EXPECT_EQ(format_metrics_json_line(row),
            R"({"step":12,"loss":2.3125,"lr":2e-05,"grad_norm":0.81,"tokens_per_s":5120.0})");
}

TEST(MetricsJsonl, EvalRow) {
  EXPECT_EQ(format_metrics_json_line({100, {{"eval_loss", 2.05}}}), R"({"step":100,"eval_loss":2.05})");
}

TEST(MetricsJsonl, NonFiniteNumbersAreNullWithKeyKept) {
  EXPECT_EQ(format_metrics_json_line({3, {{"loss", kNaN}, {"grad_norm", kInf}, {"x", -kInf}, {"lr", 1.0}}}),
            R"({"step":3,"loss":null,"grad_norm":null,"x":null,"lr":1.0})");
}

TEST(MetricsJsonl, NamesAreEscaped) {
  EXPECT_EQ(format_metrics_json_line({1, {{"a\"b", 0.5}}}), R"({"step":1,"a\"b":0.5})");
}

class MetricsJsonlFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_support::fresh_test_dir("ferry_jsonl_test");
    path_ = dir_ / "run" / "metrics.jsonl";
  }
  void TearDown() override { test_support::remove_tree(dir_); }
  void write_raw(const std::string& content) {
    std::filesystem::create_directories(path_.parent_path());
    std::ofstream(path_, std::ios::binary) << content;
  }
  std::filesystem::path dir_;
  std::filesystem::path path_;
};

TEST_F(MetricsJsonlFileTest, EachLineIsOnDiskRightAwayAndReopeningAppends) {
  {
    MetricsJsonlWriter writer(path_);  // creates the folder
    writer.write({1, {{"loss", 3.0}}});
    EXPECT_EQ(read_file(path_), "{\"step\":1,\"loss\":3.0}\n");  // flushed before close
    writer.write({2, {{"loss", 2.5}}});
    writer.close();
  }
  MetricsJsonlWriter again(path_);
  again.write({3, {{"loss", 2.0}}});
  again.close();
  EXPECT_EQ(read_file(path_), "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n{\"step\":3,\"loss\":2.0}\n");
}

TEST_F(MetricsJsonlFileTest, AppendAfterTornLineStartsOnAFreshLine) {
  write_raw("{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"lo");
  MetricsJsonlWriter writer(path_);
  writer.write({2, {{"loss", 2.5}}});
  writer.close();
  EXPECT_EQ(read_file(path_), "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"lo\n{\"step\":2,\"loss\":2.5}\n");
}

TEST_F(MetricsJsonlFileTest, TruncateKeepsRowsUpToTheResumeStep) {
  write_raw(
      "{\"step\":1,\"loss\":3.0}\n"
      "{\"step\":2,\"loss\":2.5}\n"
      "{\"step\":2,\"eval_loss\":2.7}\n"
      "{\"step\":3,\"loss\":2.0}\n"
      "{\"step\":4,\"loss\":1.5}\n"
      "{\"step\":5,\"lo");  // the crash cut this one off
  EXPECT_EQ(truncate_metrics_jsonl(path_, 2), 3u);
  EXPECT_EQ(read_file(path_), "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n{\"step\":2,\"eval_loss\":2.7}\n");
}

TEST_F(MetricsJsonlFileTest, TruncateDropsTornLinesInTheMiddle) {
  write_raw("{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"lo\n{\"step\":2,\"loss\":2.5}\n");
  EXPECT_EQ(truncate_metrics_jsonl(path_, 10), 1u);
  EXPECT_EQ(read_file(path_), "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n");
}

TEST_F(MetricsJsonlFileTest, TruncateLeavesAnUntouchedFileAlone) {
  const std::string content = "{\"step\":1,\"loss\":null}\n\n{\"step\":2,\"loss\":2.5}\n";
  write_raw(content);
  EXPECT_EQ(truncate_metrics_jsonl(path_, 2), 0u);
  EXPECT_EQ(read_file(path_), content);
}

TEST_F(MetricsJsonlFileTest, TruncateToBeforeTheFirstStepEmptiesTheFile) {
  write_raw("{\"step\":0,\"eval_loss\":3.0}\n{\"step\":1,\"loss\":2.5}\n");
  EXPECT_EQ(truncate_metrics_jsonl(path_, -1), 2u);
  EXPECT_EQ(read_file(path_), "");
}

TEST_F(MetricsJsonlFileTest, TruncateOfMissingFileIsFine) { EXPECT_EQ(truncate_metrics_jsonl(path_, 5), 0u); }

TEST_F(MetricsJsonlFileTest, TruncateRejectsRowsWithoutStepNamingTheLine) {
  write_raw("{\"step\":1,\"loss\":3.0}\n{\"loss\":2.5}\n");
  try {
    truncate_metrics_jsonl(path_, 5);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ferry
