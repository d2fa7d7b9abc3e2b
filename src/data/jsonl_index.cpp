// Indexed jsonl files (see jsonl_index.h).
#include "src/data/jsonl_index.h"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ferry {
namespace {

// (size, modification time in ns) of `path`; InputError when it cannot be read.
std::pair<uintmax_t, int64_t> file_stamp(const std::string& path) {
  std::error_code error;
  const uintmax_t bytes = std::filesystem::file_size(path, error);
  const auto time = error ? std::filesystem::file_time_type{} : std::filesystem::last_write_time(path, error);
  if (error) throw InputError("cannot read data file '" + path + "': " + error.message());
  return {bytes, static_cast<int64_t>(
                     std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count())};
}

}  // namespace

JsonlIndex::JsonlIndex(std::string path, bool skip_bad_lines,
                       const std::function<bool(int64_t, const nlohmann::ordered_json&)>& keep, int64_t max_kept)
    : path_(std::move(path)) {
  std::tie(file_bytes_, file_mtime_) = file_stamp(path_);
  stats_ = read_jsonl_at(path_, skip_bad_lines, [&](int64_t line, uint64_t offset, const nlohmann::ordered_json& object) {
    if (max_kept > 0 && static_cast<int64_t>(offsets_.size()) >= max_kept) return;
    if (!keep(line, object)) return;
    offsets_.push_back(offset);
    lines_.push_back(line);
  });
  offsets_.shrink_to_fit();
  lines_.shrink_to_fit();
}

void JsonlIndex::check_unchanged() const {
  const auto [bytes, mtime] = file_stamp(path_);
  if (bytes != file_bytes_ || mtime != file_mtime_) {
    throw InputError(detail::concat(path_, ": the file changed since the run first read it (", file_bytes_,
                                    " bytes then, ", bytes, " now); the run reads its lines again as it goes, so ",
                                    "restore it, or edit a copy and restart the run"));
  }
}

nlohmann::ordered_json JsonlIndex::read(size_t i) const {
  FERRY_CHECK(i < offsets_.size(), "jsonl line index out of range");
  check_unchanged();
  return read_jsonl_line(path_, offsets_[i], lines_[i]);
}

}  // namespace ferry
