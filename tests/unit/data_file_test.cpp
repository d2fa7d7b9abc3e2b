// Data files as users name them (src/data/data_file.h): jsonl, JSON arrays, Parquet and the local hub
// cache's hf:ORG/NAME[:SPLIT], streamed and read again by position; and the bad paths a user gives by
// mistake (a missing file, an empty one, a binary one, a folder that holds no data), each an InputError
// naming the path. Parquet content is written by pyarrow (the deps venv's python), not by Ferry.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/data/data_file.h"
#include "src/data/row_index.h"

namespace ferry {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

class DataFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("data_file_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::vector<Json> rows(const std::string& spec, std::vector<int64_t>* numbers = nullptr) {
    std::vector<Json> out;
    DataFile::open(spec).for_each(false, [&](int64_t number, uint64_t, const Json& row) {
      out.push_back(row);
      if (numbers) numbers->push_back(number);
    });
    return out;
  }
  // The InputError message of opening (and reading) `spec`.
  std::string error_of(const std::string& spec) {
    try {
      rows(spec);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir_;
};

TEST_F(DataFileTest, JsonArrayStreamsItsObjectsAndReadsThemAgain) {
  const fs::path file = write("rows.json", "[\n {\"a\": \"x ] } [ \\\" {\", \"n\": [1, {\"b\": 2}]},\n {\"a\": \"y\"}\n]\n");
  std::vector<int64_t> numbers;
  const std::vector<Json> got = rows(file.string(), &numbers);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], Json::parse(R"({"a": "x ] } [ \" {", "n": [1, {"b": 2}]})"));
  EXPECT_EQ(got[1], Json::parse(R"({"a": "y"})"));
  EXPECT_EQ(numbers, (std::vector<int64_t>{1, 2}));
  const RowIndex index(DataFile::open(file.string()), false, [](int64_t, const Json&) { return true; });
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index.read(1), got[1]);
  EXPECT_EQ(index.read(0), got[0]);
  EXPECT_EQ(index.where(1), file.string() + " item 2");
}

TEST_F(DataFileTest, JsonFileOfOneObjectPerLineIsJsonl) {
  const fs::path file = write("rows.json", "{\"a\": 1}\n{\"a\": 2}\n");
  EXPECT_EQ(rows(file.string()).size(), 2u);
  EXPECT_EQ(DataFile::open(file.string()).kind(), DataFile::Kind::jsonl);
}

TEST_F(DataFileTest, BadArrayItemNamesTheItemAndLine) {
  const fs::path file = write("bad.json", "[{\"a\": 1},\n 3]");
  const std::string message = error_of(file.string());
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("item 2"), std::string::npos) << message;
  const fs::path truncated = write("cut.json", "[{\"a\": 1}, {\"a\": ");
  EXPECT_NE(error_of(truncated.string()).find("truncated"), std::string::npos) << error_of(truncated.string());
}

TEST_F(DataFileTest, BadPathsAreInputErrorsNamingThem) {
  const fs::path empty = write("empty.jsonl", "");
  const fs::path binary = write("weights.bin", std::string("\x01\x02\0\0\x7f", 5) + "garbage");
  fs::create_directories(dir_ / "folder");
  write("folder/notes.txt", "hello");
  for (const auto& [spec, words] : std::vector<std::pair<std::string, std::string>>{
           {(dir_ / "missing.jsonl").string(), "does not exist"},
           {empty.string(), "is empty"},
           {binary.string(), "is binary"},
           {(dir_ / "folder").string(), "is a folder"}}) {
    const std::string message = error_of(spec);
    EXPECT_NE(message.find(spec), std::string::npos) << message;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  }
}

// A hub cache tree as huggingface_hub lays it out, with Parquet files written by pyarrow.
TEST_F(DataFileTest, HubCacheDatasetSplitIsReadOffline) {
  const fs::path repo = dir_ / "hub" / "datasets--acme--qa";
  const fs::path snapshot = repo / "snapshots" / "abc123";
  fs::create_directories(snapshot / "data");
  write("hub/datasets--acme--qa/refs/main", "abc123");
  const std::string script =
      "import pyarrow as pa, pyarrow.parquet as pq, sys\n"
      "d = sys.argv[1]\n"
      "pq.write_table(pa.table({'prompt': ['a', 'b'], 'n': [1, 2]}), d + '/data/train-00000-of-00002.parquet')\n"
      "pq.write_table(pa.table({'prompt': ['c'], 'n': [3]}), d + '/data/train-00001-of-00002.parquet')\n"
      "pq.write_table(pa.table({'prompt': ['t'], 'n': [9]}), d + '/data/test-00000-of-00001.parquet')\n";
  write("make.py", script);
  ASSERT_EQ(std::system((std::string(FERRY_PYTHON) + " " + (dir_ / "make.py").string() + " " + snapshot.string()).c_str()), 0);
  ::setenv("HF_HUB_CACHE", (dir_ / "hub").string().c_str(), 1);
  std::vector<Json> train = rows("hf:acme/qa");
  ASSERT_EQ(train.size(), 3u);
  EXPECT_EQ(train[2], Json::parse(R"({"prompt": "c", "n": 3})"));
  std::vector<Json> test = rows("hf:acme/qa:test");
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(test[0]["prompt"], "t");
  const std::string missing_split = error_of("hf:acme/qa:validation");
  EXPECT_NE(missing_split.find("validation"), std::string::npos) << missing_split;
  EXPECT_NE(missing_split.find("train-00000-of-00002.parquet"), std::string::npos) << missing_split;
  const std::string missing = error_of("hf:acme/nope");
  EXPECT_NE(missing.find("acme/qa"), std::string::npos) << missing;  // what the cache has
  EXPECT_NE(missing.find("datasets--acme--nope"), std::string::npos) << missing;  // where it looked
  ::unsetenv("HF_HUB_CACHE");
}

}  // namespace
}  // namespace ferry
