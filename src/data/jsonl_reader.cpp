// Line-numbered jsonl streaming with strict or skipping error handling.
#include "src/data/jsonl_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/core/error.h"

namespace ferry {

JsonlStats read_jsonl(const std::string& path, bool skip_bad_lines,
                      const std::function<void(int64_t, const nlohmann::json&)>& on_line) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read data file '" + path + "': " + std::strerror(errno));
  JsonlStats stats;
  std::string text;
  int64_t line_number = 0;
  while (std::getline(in, text)) {
    ++line_number;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++stats.lines;
    std::string problem;
    try {
      const nlohmann::json object = nlohmann::json::parse(text);
      if (!object.is_object()) throw InputError("expected a JSON object, got " + std::string(object.type_name()));
      on_line(line_number, object);
      continue;
    } catch (const nlohmann::json::parse_error& e) {
      problem = std::string("invalid JSON: ") + e.what();
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

}  // namespace ferry
