// Streams a jsonl file one JSON object per line, with the line number, so that every data error
// can name file:line. Blank lines are skipped. Malformed lines either stop the run (InputError
// "file:line: ...") or, with skip_bad_lines, are counted and skipped; the same policy applies
// to errors the per-line callback throws (a missing field, a wrong role). A line longer than
// kMaxJsonlLineBytes is such an error too, found without holding more than that limit in memory
// (a file without line breaks, or a runaway line, never exhausts memory).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace ferry {

// The longest data line read: far more than any conversation a model's context holds.
inline constexpr int64_t kMaxJsonlLineBytes = int64_t{16} << 20;

struct JsonlStats {
  int64_t lines = 0;    // non-blank lines read
  int64_t skipped = 0;  // malformed lines skipped (skip_bad_lines)
  std::string first_skipped_error;  // the first skipped line's message, for the summary
};

// Calls `on_line(line_number, object)` for every non-blank line (1-based line numbers). An
// InputError thrown by `on_line` gets the "file:line: " prefix added. Throws InputError when the
// file cannot be read.
JsonlStats read_jsonl(const std::string& path, bool skip_bad_lines,
                      const std::function<void(int64_t line, const nlohmann::ordered_json& object)>& on_line,
                      int64_t max_line_bytes = kMaxJsonlLineBytes);

// read_jsonl that also gives each line's byte offset in the file, for read_jsonl_line.
JsonlStats read_jsonl_at(const std::string& path, bool skip_bad_lines,
                         const std::function<void(int64_t line, uint64_t offset, const nlohmann::ordered_json& object)>& on_line,
                         int64_t max_line_bytes = kMaxJsonlLineBytes);

// The object on the line that starts at byte `offset` (line number `line`, for messages) of a file
// read_jsonl_at read before. InputError naming file:line when it no longer parses.
nlohmann::ordered_json read_jsonl_line(const std::string& path, uint64_t offset, int64_t line,
                               int64_t max_line_bytes = kMaxJsonlLineBytes);

}  // namespace ferry
