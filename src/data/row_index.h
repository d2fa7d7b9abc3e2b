// A data file checked once, then read again a row at a time: only where each kept row is is held
// (16 bytes a row), so a file of millions of rows is used a batch at a time in megabytes instead
// of being held whole. Every row is checked when the index is built, so a bad row stops the run
// before any work (or is skipped, with data.skip_bad_lines), not hours in. Reading a jsonl or json
// row again checks that the file has not changed since (size and modification time).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "src/data/data_file.h"

namespace ferry {

class RowIndex {
 public:
  RowIndex() = default;
  // Reads every row of `file` through `keep(number, row)`, which returns whether the row is kept
  // and throws InputError for a bad one (stopping, or skipped and counted with skip_bad_rows, as
  // DataFile::for_each does). `max_kept` > 0 stops keeping after that many rows.
  RowIndex(DataFile file, bool skip_bad_rows,
           const std::function<bool(int64_t number, const nlohmann::ordered_json& row)>& keep, int64_t max_kept = 0);

  const DataFile& file() const { return file_; }
  const std::string& path() const { return file_.name(); }
  const JsonlStats& stats() const { return stats_; }
  size_t size() const { return positions_.size(); }
  bool empty() const { return positions_.empty(); }
  int64_t line(size_t i) const { return numbers_[i]; }  // 1-based line / row number of kept row i
  std::string where(size_t i) const { return file_.where(numbers_[i]); }

  // Kept row i, read again. InputError naming the file when it changed since the index was built.
  nlohmann::ordered_json read(size_t i) const;

 private:
  DataFile file_;
  JsonlStats stats_;
  std::vector<uint64_t> positions_;  // where each kept row is (DataFile::read)
  std::vector<int64_t> numbers_;     // its line or row number
};

}  // namespace ferry
