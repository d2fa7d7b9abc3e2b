// A jsonl file checked once, then read again a line at a time: only where each kept line starts is
// held (16 bytes a line), so a file of millions of lines is used a batch at a time in megabytes
// instead of being held whole. Every line is checked when the index is built, so a bad line stops
// the run before any work (or is skipped, with data.skip_bad_lines), not hours in. Reading a line
// again checks that the file has not changed since (size and modification time).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "src/data/jsonl_reader.h"

namespace ferry {

class JsonlIndex {
 public:
  JsonlIndex() = default;
  // Reads every line of `path` through `keep(line, object)`, which returns whether the line is
  // kept and throws InputError for a bad one (stopping, or skipped and counted with
  // skip_bad_lines, as read_jsonl does). `max_kept` > 0 stops keeping after that many lines.
  JsonlIndex(std::string path, bool skip_bad_lines,
             const std::function<bool(int64_t line, const nlohmann::ordered_json& object)>& keep, int64_t max_kept = 0);

  const std::string& path() const { return path_; }
  const JsonlStats& stats() const { return stats_; }
  size_t size() const { return offsets_.size(); }
  bool empty() const { return offsets_.empty(); }
  int64_t line(size_t i) const { return lines_[i]; }  // 1-based line number of kept line i

  // Kept line i's object, read again. InputError naming the file when it changed since the index
  // was built.
  nlohmann::ordered_json read(size_t i) const;

 private:
  void check_unchanged() const;

  std::string path_;
  JsonlStats stats_;
  std::vector<uint64_t> offsets_;  // byte offset of each kept line
  std::vector<int64_t> lines_;     // its line number
  uintmax_t file_bytes_ = 0;       // size and modification time when indexed
  int64_t file_mtime_ = 0;
};

}  // namespace ferry
