// ArrowRows against pyarrow (tests/parity/data_arrow_rows_ref.py): every row of a Parquet file of 16
// row groups, a save_to_disk folder of 3 shards, a hub-layout folder of 2 Parquet files and tables
// of the other Arrow types (large_string, large_list, dictionary strings, fixed-size lists, maps,
// nested structs, nulls, 8- to 64-bit ints, float32) as Parquet, Arrow stream and Arrow file, equals
// pyarrow's Table.to_pylist() (key order included), in order, shuffled and from 4 threads at once;
// where() names each row's file and 1-based row. Bad inputs made from those files (truncated,
// corrupted, a shard missing, columns that differ, a DatasetDict folder, unsupported column types)
// are InputErrors naming the file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "src/data/arrow_rows.h"
#include "tests/support/scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const std::string kFixtures = std::string(FERRY_FIXTURES_DIR) + "/data_arrow_rows/";

const ordered_json& cases() {
  static const ordered_json all = ordered_json::parse(read_file(kFixtures + "cases.json"));
  return all;
}

fs::path scratch() {
  static const fs::path dir = [] {
    const auto d = test_support::process_scratch_dir("ferry_arrow_rows_parity");
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string bytes_of(const fs::path& path) { return read_file(path.string()); }

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs `body`, which must throw an InputError whose message holds every one of `parts`.
template <class Fn>
void expect_input_error(Fn&& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "no InputError; expected one naming " << parts.front();
  } catch (const InputError& e) {
    for (const auto& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' not in: " << e.what();
    }
  }
}

TEST(ArrowRowsParity, EverySourceReadsAsPyarrow) {
  ASSERT_EQ(cases().size(), 6u);
  for (const auto& [name, expected] : cases().items()) {
    SCOPED_TRACE(name);
    const ArrowRows rows(kFixtures + name);
    const auto& want = expected["rows"];
    ASSERT_EQ(rows.size(), static_cast<int64_t>(want.size()));
    EXPECT_EQ(ordered_json(rows.columns()), expected["columns"]);
    std::vector<std::string> files;
    for (const auto& file : expected["files"]) files.push_back(kFixtures + file[0].get<std::string>());
    EXPECT_EQ(rows.files(), files);
    int64_t i = 0;
    for (const auto& file : expected["files"]) {
      for (int64_t r = 1; r <= file[1].get<int64_t>(); ++r, ++i) {
        ASSERT_EQ(rows.row(i), want[static_cast<size_t>(i)]) << rows.where(i);
        EXPECT_EQ(rows.where(i), kFixtures + file[0].get<std::string>() + " row " + std::to_string(r));
      }
    }
    EXPECT_EQ(i, rows.size());
  }
  // The chat rows: a 150 kB content string and nulls at three depths came through.
  const ArrowRows saved(kFixtures + "saved");
  EXPECT_GT(saved.row(5)["messages"][1]["content"].get<std::string>().size(), 100'000u);
  EXPECT_TRUE(saved.row(4)["messages"].is_null());
  EXPECT_TRUE(saved.row(3)["messages"][0]["content"].is_null());
  EXPECT_TRUE(saved.row(0)["tag"].is_null());
}

TEST(ArrowRowsParity, ShuffledOrderAndThreadsGiveTheSameRows) {
  for (const std::string name : {"conversations.parquet", "saved", "hub", "types.parquet"}) {
    SCOPED_TRACE(name);
    const ArrowRows rows(kFixtures + name);
    const auto& want = cases()[name]["rows"];
    std::vector<int64_t> order(static_cast<size_t>(rows.size()));
    for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int64_t>(k);
    std::shuffle(order.begin(), order.end(), std::mt19937(1234));
    for (int64_t i : order) ASSERT_EQ(rows.row(i), want[static_cast<size_t>(i)]) << rows.where(i);
    // Four threads, each its own order, on one ArrowRows.
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::vector<int64_t> mine = order;
        std::shuffle(mine.begin(), mine.end(), std::mt19937(t));
        for (int64_t i : mine) wrong += rows.row(i) != want[static_cast<size_t>(i)];
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(wrong.load(), 0);
  }
}

TEST(ArrowRowsParity, RecognisesFilesByContentNotName) {
  EXPECT_TRUE(ArrowRows::is_parquet_file(kFixtures + "conversations.parquet"));
  EXPECT_FALSE(ArrowRows::is_parquet_file(kFixtures + "types.arrow"));
  EXPECT_FALSE(ArrowRows::is_parquet_file(kFixtures + "saved"));
  EXPECT_TRUE(ArrowRows::is_datasets_folder(kFixtures + "saved"));
  EXPECT_FALSE(ArrowRows::is_datasets_folder(kFixtures + "hub"));
  EXPECT_FALSE(ArrowRows::is_datasets_folder(kFixtures + "dict"));
  const fs::path renamed = scratch() / "conversations.bin";
  fs::copy_file(kFixtures + "conversations.parquet", renamed, fs::copy_options::overwrite_existing);
  EXPECT_TRUE(ArrowRows::is_parquet_file(renamed));
  const ArrowRows rows(renamed);
  EXPECT_EQ(rows.row(3), cases()["conversations.parquet"]["rows"][3]);
}

TEST(ArrowRowsParity, UnsupportedColumnsFailWhenARowHoldsAValue) {
  const std::string path = kFixtures + "unsupported.parquet";
  const ArrowRows rows(path);  // opening is fine: the loader may never read such a row
  EXPECT_EQ(rows.columns(), (std::vector<std::string>{"text", "when", "blob"}));
  expect_input_error([&] { (void)rows.row(0); }, {path + " row 1", "'blob'", "binary"});
  EXPECT_EQ(rows.row(1), ordered_json::parse(R"({"text": "b", "when": null, "blob": null})"));
  expect_input_error([&] { (void)rows.row(2); }, {path + " row 3", "'blob'"});
}

// Timestamps, dates and decimals read as the text pyarrow's cast to string gives.
TEST(ArrowRowsParity, TemporalAndDecimalColumnsAreText) {
  const std::string path = kFixtures + "temporal.parquet";
  const ArrowRows rows(path);
  const ordered_json expected = ordered_json::parse(read_file(kFixtures + "temporal.json"));
  ASSERT_EQ(rows.size(), static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows.row(i), expected[static_cast<size_t>(i)]) << i;
}

TEST(ArrowRowsParity, BadFilesAreInputErrorsNamingTheFile) {
  const std::string parquet = bytes_of(kFixtures + "conversations.parquet");

  const fs::path truncated = scratch() / "truncated.parquet";
  write_bytes(truncated, parquet.substr(0, parquet.size() / 2));
  EXPECT_TRUE(ArrowRows::is_parquet_file(truncated));
  expect_input_error([&] { ArrowRows rows(truncated); }, {truncated.string()});

  // Footer intact, row groups overwritten: opening works, reading rows fails cleanly.
  const fs::path corrupt = scratch() / "corrupt.parquet";
  std::string damaged = parquet;
  uint32_t footer = 0;  // the footer's length, in the 4 bytes before the closing PAR1
  std::memcpy(&footer, parquet.data() + parquet.size() - 8, 4);
  ASSERT_LT(footer + 12u, parquet.size());
  std::fill(damaged.begin() + 4, damaged.end() - footer - 8, '\xab');
  write_bytes(corrupt, damaged);
  const ArrowRows rows(corrupt);
  int failed = 0;
  for (int64_t i = 0; i < rows.size(); ++i) {
    try {
      (void)rows.row(i);
    } catch (const InputError& e) {
      ++failed;
      EXPECT_NE(std::string(e.what()).find(corrupt.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(failed, 0);

  const fs::path random = scratch() / "random.parquet";
  std::mt19937 rng(5);
  std::string noise(5000, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  write_bytes(random, noise);
  EXPECT_FALSE(ArrowRows::is_parquet_file(random));
  expect_input_error([&] { ArrowRows rows(random); }, {random.string()});

  const fs::path empty = scratch() / "empty.parquet";
  write_bytes(empty, "");
  expect_input_error([&] { ArrowRows rows(empty); }, {empty.string(), "empty"});

  // A folder of Parquet files with one bad file names that file.
  const fs::path folder = scratch() / "folder";
  fs::create_directories(folder);
  fs::copy_file(kFixtures + "conversations.parquet", folder / "a.parquet", fs::copy_options::overwrite_existing);
  write_bytes(folder / "b.parquet", noise);
  expect_input_error([&] { ArrowRows rows(folder); }, {(folder / "b.parquet").string(), "PAR1"});
}

TEST(ArrowRowsParity, BadFoldersAreInputErrorsNamingTheFile) {
  // A save_to_disk folder with its second shard missing, or cut short.
  const fs::path saved = scratch() / "saved";
  fs::create_directories(saved);
  for (const auto& entry : fs::directory_iterator(kFixtures + "saved")) {
    fs::copy_file(entry.path(), saved / entry.path().filename(), fs::copy_options::overwrite_existing);
  }
  const fs::path shard = saved / "data-00001-of-00003.arrow";
  const std::string bytes = bytes_of(shard);
  fs::remove(shard);
  expect_input_error([&] { ArrowRows rows(saved); }, {shard.string(), "missing", "shard 2 of 3"});
  write_bytes(shard, bytes.substr(0, bytes.size() - 300));
  expect_input_error([&] { ArrowRows rows(saved); }, {shard.string()});
  write_bytes(shard, bytes);
  EXPECT_EQ(ArrowRows(saved).size(), 110);

  expect_input_error([&] { ArrowRows rows(kFixtures + "mismatch"); },
                     {kFixtures + "mismatch/a.parquet", kFixtures + "mismatch/b.parquet", "answer"});
  expect_input_error([&] { ArrowRows rows(kFixtures + "dict"); }, {"dataset_dict.json", kFixtures + "dict/train"});
  // A split of the DatasetDict is a datasets folder.
  EXPECT_EQ(ArrowRows(kFixtures + "dict/test").row(0), cases()["saved"]["rows"][5]);
}

}  // namespace
}  // namespace ferry
