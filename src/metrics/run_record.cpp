// Reading a run folder for a report (see run_record.h).
#include "src/metrics/run_record.h"

#include "core/error.h"
#include "core/file_util.h"
#include "src/metrics/resume_log.h"

namespace ferry {

namespace fs = std::filesystem;

std::string RunRecord::stage() const {
  if (result.is_object() && result.contains("stage") && result.at("stage").is_string()) {
    return result.at("stage").get<std::string>();
  }
  // config.yaml starts with the line "stage: sft  # ..." (core/config/config_io's writer).
  for (size_t begin = 0; begin < config_yaml.size();) {
    size_t end = config_yaml.find('\n', begin);
    if (end == std::string::npos) end = config_yaml.size();
    const std::string line = config_yaml.substr(begin, end - begin);
    begin = end + 1;
    if (!line.starts_with("stage:")) continue;
    const size_t first = line.find_first_not_of(' ', 6);
    if (first == std::string::npos) return {};
    const size_t last = line.find_first_of(" #", first);
    return line.substr(first, last == std::string::npos ? std::string::npos : last - first);
  }
  return {};
}

bool holds_metrics(const fs::path& dir) { return fs::is_regular_file(dir / "metrics.jsonl"); }

RunRecord read_run_record(const fs::path& dir) {
  if (!holds_metrics(dir)) {
    throw InputError(dir.string() + ": no metrics.jsonl here; give the output.dir of a run (it writes metrics.jsonl "
                     "from its first logged step, with logging.jsonl on) or a pipeline's folder");
  }
  RunRecord record;
  record.dir = dir;
  record.metrics = read_metrics_series(dir / "metrics.jsonl");
  record.resume_steps = read_resume_steps(dir);
  if (fs::is_regular_file(dir / "config.yaml")) record.config_yaml = read_file(dir / "config.yaml");
  if (fs::is_regular_file(dir / "memory_plan.txt")) record.memory_plan = read_file(dir / "memory_plan.txt");
  if (fs::is_regular_file(dir / "result.json")) {
    const std::string text = read_file(dir / "result.json");
    record.result = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (record.result.is_discarded() || !record.result.is_object()) {
      throw InputError((dir / "result.json").string() + ": not a JSON object; delete it (the run writes it again at "
                       "its end) or rerun the stage");
    }
  }
  return record;
}

}  // namespace ferry
