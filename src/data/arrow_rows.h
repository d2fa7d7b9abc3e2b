// Rows of a Parquet file, a folder of Parquet files, or a Hugging Face `datasets` folder
// (Dataset.save_to_disk: dataset_info.json + state.json + data-*.arrow, Arrow IPC stream files, in
// the order state.json's "_data_files" lists them; a single Arrow IPC file, stream or file format,
// too), each row as a JSON object: column name -> value, lists -> arrays, structs -> objects,
// null -> null, ints / floats / bools / strings as such (large_string, large_list, fixed-size lists,
// dictionary-encoded values too; maps as [key, value] pairs, as pyarrow's to_pylist gives them).
// Dates, times, timestamps, durations and decimals become text, as Arrow's cast to string writes
// them. Binary and other columns the loaders cannot use: an InputError naming the file, the row and
// the column when a row with such a (non-null) value is read.
//
// Rows are never all held. Parquet is decoded one row group at a time (the last one decoded is kept:
// reading in order decodes each group once; random order works, decoding a group per jump). Arrow
// stream files are memory-mapped and their record batches indexed once (zero-copy views into the
// map), each batch checked in full the first time a row of it is read. Rows become JSON one at a
// time. Apache Arrow's C++ libraries come from the pyarrow wheel (CMakeLists.txt: ferry::arrow);
// this header keeps them out of its includers.
//
// A folder given as a Parquet source means every *.parquet under it, sorted by path (how the hub
// cache stores a split: data/train-00000-of-00002.parquet, ...); all files must have the same
// column names in the same order, with types that give the same JSON shapes.
// Every bad input (missing, empty, truncated, corrupt, not Arrow/Parquet, a missing shard) is an
// InputError naming the file. row() may be called from several threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ferry {

class ArrowRows {
 public:
  // Whether `path` is a file that starts with Parquet's magic bytes "PAR1" (whatever its name).
  static bool is_parquet_file(const std::filesystem::path& path);
  // Whether `path` is a folder holding state.json and at least one *.arrow file.
  static bool is_datasets_folder(const std::filesystem::path& path);

  // Opens a Parquet file, a folder of Parquet files, a datasets folder or an Arrow IPC file, and
  // indexes its rows. InputError for anything bad, naming the file.
  explicit ArrowRows(const std::filesystem::path& path);
  ~ArrowRows();
  ArrowRows(ArrowRows&&) noexcept;
  ArrowRows& operator=(ArrowRows&&) noexcept;

  int64_t size() const;  // total rows over all files / shards
  // Row i (0-based over all files) as {column: value}. InputError naming where(i) for a value that
  // cannot be read (an unsupported type, a corrupt row group).
  nlohmann::ordered_json row(int64_t i) const;
  // Where row i is, for messages: "data/train.parquet row 12" (1-based within that file).
  std::string where(int64_t i) const;
  const std::vector<std::string>& columns() const;  // column names (of the first file)
  const std::vector<std::string>& files() const;    // the files read, in order

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry
