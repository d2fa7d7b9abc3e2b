// resumes.jsonl written at each start and read back for reports (see resume_log.h).
#include "src/metrics/resume_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "src/metrics/metrics_jsonl.h"

namespace ferry {

std::filesystem::path resume_log_path_in(const std::filesystem::path& output_dir) {
  return output_dir / "resumes.jsonl";
}

void update_resume_log(const std::filesystem::path& output_dir, std::optional<int64_t> resume_step, double unix_time) {
  const auto path = resume_log_path_in(output_dir);
  truncate_metrics_jsonl(path, resume_step.value_or(-1));  // same row rule as metrics.jsonl
  if (!resume_step) return;
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  nlohmann::ordered_json line;
  line["step"] = *resume_step;
  line["unix_time"] = unix_time;
  std::ofstream out(path, std::ios::out | std::ios::app | std::ios::binary);
  out << line.dump() << '\n' << std::flush;
  if (!out) {
    throw InputError("cannot write '" + path.string() + "': " + std::strerror(errno) +
                     "; make output.dir writable or set logging.jsonl: false");
  }
}

std::vector<int64_t> read_resume_steps(const std::filesystem::path& output_dir) {
  const auto path = resume_log_path_in(output_dir);
  std::vector<int64_t> steps;
  if (!std::filesystem::exists(path)) return steps;
  const std::string text = read_file(path);
  size_t line_number = 0;
  for (size_t begin = 0; begin < text.size();) {
    ++line_number;
    const size_t newline = text.find('\n', begin);
    if (newline == std::string::npos) break;  // still being written
    const std::string_view line(text.data() + begin, newline - begin);
    begin = newline + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object() || !row.contains("step") || !row.at("step").is_number_integer()) {
      throw InputError(path.string() + ":" + std::to_string(line_number) +
                       ": not a {\"step\": N} object (fix or delete that line)");
    }
    steps.push_back(row.at("step").get<int64_t>());
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

}  // namespace ferry
