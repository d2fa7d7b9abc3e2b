// metrics.jsonl formatting, appending and resume truncation.
#include "src/metrics/metrics_jsonl.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"

namespace ferry {
namespace {

std::string cannot_write(const std::filesystem::path& path, const std::string& why) {
  return "cannot write metrics file '" + path.string() + "': " + why +
         "; make output.dir writable or set logging.jsonl: false";
}

bool ends_without_newline(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) return false;
  in.seekg(-1, std::ios::end);
  char last = '\n';
  in.get(last);
  return last != '\n';
}

}  // namespace

std::string format_metrics_json_line(const MetricsRow& row) {
  nlohmann::ordered_json object;
  object["step"] = row.step;
  for (const auto& v : row.values) {
    if (std::isfinite(v.value)) {
      object[v.name] = v.value;
    } else {
      object[v.name] = nullptr;
    }
  }
  return object.dump();
}

MetricsJsonlWriter::MetricsJsonlWriter(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) throw InputError(cannot_write(path, ec.message()));
  // A crash mid-line left a partial row: start ours on a fresh line so it stays parseable.
  const bool needs_newline = ends_without_newline(path);
  out_.open(path, std::ios::out | std::ios::app | std::ios::binary);
  if (!out_) throw InputError(cannot_write(path, std::strerror(errno)));
  if (needs_newline) out_ << '\n' << std::flush;
}

void MetricsJsonlWriter::write(const MetricsRow& row) {
  FERRY_CHECK(out_.is_open(), "MetricsJsonlWriter used after close()");
  out_ << format_metrics_json_line(row) << '\n' << std::flush;
  if (!out_) throw InputError(cannot_write(path_, std::strerror(errno)));
}

void MetricsJsonlWriter::close() {
  if (!out_.is_open()) return;
  out_.close();
  if (!out_) throw InputError(cannot_write(path_, std::strerror(errno)));
}

size_t truncate_metrics_jsonl(const std::filesystem::path& path, int64_t last_step) {
  if (!std::filesystem::exists(path)) return 0;
  const std::string content = read_file(path);
  std::string kept;
  kept.reserve(content.size());
  size_t removed = 0;
  size_t line_number = 0;
  for (size_t begin = 0; begin < content.size();) {
    ++line_number;
    const size_t newline = content.find('\n', begin);
    if (newline == std::string::npos) {  // no newline: the write was cut off by a crash
      ++removed;
      break;
    }
    const std::string_view line(content.data() + begin, newline - begin);
    begin = newline + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank line
    const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const auto where = path.string() + ":" + std::to_string(line_number);
    if (row.is_discarded()) {  // a row torn by a crash, later followed by a newline: drop it
      ++removed;
      continue;
    }
    if (!row.is_object()) {
      throw InputError(where + ": not a JSON object; fix or delete that line of the metrics file and resume again");
    }
    const auto step = row.find("step");
    if (step == row.end() || !step->is_number_integer()) {
      throw InputError(where + ": row has no integer \"step\"; fix or delete that line and resume again");
    }
    if (step->get<int64_t>() <= last_step) {
      kept.append(line).push_back('\n');
    } else {
      ++removed;
    }
  }
  if (removed > 0) write_file_atomic(path, kept);
  return removed;
}

}  // namespace ferry
