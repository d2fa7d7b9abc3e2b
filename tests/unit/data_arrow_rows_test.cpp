// ArrowRows on inputs that need no reference: paths that do not exist, empty and non-Arrow files,
// folders without data, a state.json without shards. Each is an InputError naming the path; the
// is_parquet_file / is_datasets_folder probes say no. (Rows against pyarrow:
// tests/parity/data_arrow_rows_parity_test.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/data/arrow_rows.h"
#include "tests/support/scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  static const fs::path dir = [] {
    const auto d = test_support::process_scratch_dir("ferry_arrow_rows_unit");
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const fs::path& path) {
  try {
    ArrowRows rows(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const fs::path& path, const std::vector<std::string>& parts) {
  const std::string message = error_of(path);
  ASSERT_FALSE(message.empty()) << path << ": no InputError";
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

TEST(ArrowRows, MissingPathIsAnInputError) {
  expect_error(scratch() / "nowhere.parquet", {(scratch() / "nowhere.parquet").string(), "no such file"});
  EXPECT_FALSE(ArrowRows::is_parquet_file(scratch() / "nowhere.parquet"));
  EXPECT_FALSE(ArrowRows::is_datasets_folder(scratch() / "nowhere"));
}

TEST(ArrowRows, EmptyAndForeignFilesAreInputErrors) {
  write_bytes(scratch() / "empty.parquet", "");
  expect_error(scratch() / "empty.parquet", {(scratch() / "empty.parquet").string(), "empty"});
  EXPECT_FALSE(ArrowRows::is_parquet_file(scratch() / "empty.parquet"));

  write_bytes(scratch() / "lines.parquet", "{\"text\": \"not parquet\"}\n");
  expect_error(scratch() / "lines.parquet", {(scratch() / "lines.parquet").string(), "PAR1"});
  EXPECT_FALSE(ArrowRows::is_parquet_file(scratch() / "lines.parquet"));

  // The magic bytes alone, or magic at both ends around nothing: not a readable Parquet file.
  write_bytes(scratch() / "magic.parquet", "PAR1");
  EXPECT_TRUE(ArrowRows::is_parquet_file(scratch() / "magic.parquet"));
  expect_error(scratch() / "magic.parquet", {(scratch() / "magic.parquet").string()});
  write_bytes(scratch() / "hollow.parquet", std::string("PAR1\x08\x00\x00\x00PAR1", 12));
  expect_error(scratch() / "hollow.parquet", {(scratch() / "hollow.parquet").string()});

  // An Arrow stream's continuation marker and then nothing sensible.
  write_bytes(scratch() / "data-00000-of-00001.arrow", std::string("\xff\xff\xff\xff\x10\x00\x00\x00garbagegarbage!!", 24));
  expect_error(scratch() / "data-00000-of-00001.arrow", {(scratch() / "data-00000-of-00001.arrow").string()});
}

TEST(ArrowRows, FoldersWithoutDataAreInputErrors) {
  const fs::path empty = scratch() / "empty_folder";
  fs::create_directories(empty);
  expect_error(empty, {empty.string(), "no *.parquet"});

  const fs::path other = scratch() / "other";
  write_bytes(other / "train.jsonl", "{}\n");
  write_bytes(other / ".cache" / "hidden.parquet", "not read: hidden folders are skipped");
  expect_error(other, {other.string(), "no *.parquet"});

  const fs::path state_only = scratch() / "state_only";
  write_bytes(state_only / "state.json", "{\"_data_files\": []}");
  EXPECT_FALSE(ArrowRows::is_datasets_folder(state_only));
  expect_error(state_only, {(state_only / "state.json").string(), "_data_files"});

  const fs::path bad_state = scratch() / "bad_state";
  write_bytes(bad_state / "state.json", "{not json");
  write_bytes(bad_state / "data-00000-of-00001.arrow", "x");
  EXPECT_TRUE(ArrowRows::is_datasets_folder(bad_state));
  expect_error(bad_state, {(bad_state / "state.json").string()});

  const fs::path escaping = scratch() / "escaping";
  write_bytes(escaping / "state.json", "{\"_data_files\": [{\"filename\": \"../empty.parquet\"}]}");
  expect_error(escaping, {(escaping / "state.json").string(), "_data_files[0]"});
}

}  // namespace
}  // namespace ferry
