// Line-numbered jsonl streaming with strict or skipping error handling.
#include "src/data/jsonl_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ferry {
namespace {

// Reads one line (without its '\n') into `line`, keeping at most `limit` bytes of it; returns the
// line's whole length, or -1 at the end of the file.
int64_t read_line_bounded(std::streambuf& in, std::string& line, int64_t limit) {
  line.clear();
  int c = in.sbumpc();
  if (c == std::char_traits<char>::eof()) return -1;
  int64_t length = 0;
  while (c != std::char_traits<char>::eof() && c != '\n') {
    if (length++ < limit) line.push_back(static_cast<char>(c));
    c = in.sbumpc();
  }
  return length;
}

// The object on one line of `length` bytes (of which `text` holds at most `limit`), or InputError.
nlohmann::ordered_json parse_line(const std::string& text, int64_t length, int64_t limit) {
  if (length > limit) {
    throw InputError(detail::concat("the line is ", length, " bytes, more than the ", limit,
                                    " a data line may have (is this a JSON Lines file, one object per line?)"));
  }
  nlohmann::ordered_json object;
  try {
    object = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::exception& e) {  // parse errors, and numbers out of range (406)
    throw InputError(std::string("invalid JSON: ") + e.what());
  }
  if (!object.is_object()) throw InputError("expected a JSON object, got " + std::string(object.type_name()));
  return object;
}

}  // namespace

JsonlStats read_jsonl(const std::string& path, bool skip_bad_lines,
                      const std::function<void(int64_t, const nlohmann::ordered_json&)>& on_line, int64_t max_line_bytes) {
  return read_jsonl_at(
      path, skip_bad_lines,
      [&](int64_t line, uint64_t, const nlohmann::ordered_json& object) { on_line(line, object); }, max_line_bytes);
}

JsonlStats read_jsonl_at(const std::string& path, bool skip_bad_lines,
                         const std::function<void(int64_t, uint64_t, const nlohmann::ordered_json&)>& on_line,
                         int64_t max_line_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read data file '" + path + "': " + std::strerror(errno));
  JsonlStats stats;
  std::string text;
  int64_t line_number = 0;
  uint64_t offset = 0, next_offset = 0;
  for (int64_t length; (length = read_line_bounded(*in.rdbuf(), text, max_line_bytes)) >= 0; offset = next_offset) {
    ++line_number;
    next_offset = offset + static_cast<uint64_t>(length) + 1;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++stats.lines;
    std::string problem;
    try {
      on_line(line_number, offset, parse_line(text, length, max_line_bytes));
      continue;
    } catch (const nlohmann::ordered_json::exception& e) {  // a value of the wrong type the reader did not check
      problem = std::string("unexpected value: ") + e.what();
    } catch (const InputError& e) {
      problem = e.what();
    }
    const std::string message = path + ":" + std::to_string(line_number) + ": " + problem;
    if (!skip_bad_lines) {
      throw InputError(message + " (fix the line, or set data.skip_bad_lines: true to skip bad lines)");
    }
    if (stats.skipped++ == 0) stats.first_skipped_error = message;
  }
  if (in.bad()) throw InputError("error while reading '" + path + "'");
  return stats;
}

nlohmann::ordered_json read_jsonl_line(const std::string& path, uint64_t offset, int64_t line, int64_t max_line_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read data file '" + path + "': " + std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(offset));
  std::string text;
  const int64_t length = in ? read_line_bounded(*in.rdbuf(), text, max_line_bytes) : -1;
  const std::string where = path + ":" + std::to_string(line) + ": ";
  if (length < 0) throw InputError(where + "the file is shorter than when it was first read; it changed during the run");
  try {
    return parse_line(text, length, max_line_bytes);
  } catch (const InputError& e) {
    throw InputError(where + e.what() + " (the file changed since it was first read?)");
  }
}

}  // namespace ferry
