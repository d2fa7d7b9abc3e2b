// pipeline.json written and read back (see pipeline_record.h).
#include "cli/pipeline_record.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"

namespace ferry::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "ferry-pipeline";
constexpr int kVersion = 1;

// Absolute, normalised, without a trailing separator ("runs/demo/sft/" -> "/work/runs/demo/sft").
fs::path absolute_normal(const fs::path& path) {
  fs::path normal = fs::absolute(path).lexically_normal();
  return normal.has_filename() ? normal : normal.parent_path();
}

}  // namespace

fs::path pipeline_folder(const std::vector<std::string>& stage_output_dirs) {
  std::optional<fs::path> common;
  for (const std::string& dir : stage_output_dirs) {
    const fs::path path = absolute_normal(dir);
    const fs::path holder = path.parent_path();
    if (!common) {
      common = holder;
      continue;
    }
    // The deepest folder holding both: the common leading components, which include `path`
    // itself when one stage's folder holds another's.
    fs::path shared;
    auto a = common->begin();
    auto b = path.begin();
    for (; a != common->end() && b != path.end() && *a == *b; ++a, ++b) shared /= *a;
    common = shared;
  }
  // A folder that is one stage's own output.dir (a/ beside a/b/) would mix the two: go one up.
  for (const std::string& dir : stage_output_dirs) {
    if (common && absolute_normal(dir) == *common) common = common->parent_path();
  }
  if (!common || common->empty()) return fs::current_path();
  const fs::path relative = common->lexically_relative(fs::current_path());
  if (!relative.empty() && *relative.begin() != "..") return relative;
  return *common;
}

std::string folder_in_pipeline(const fs::path& pipeline_folder, const std::string& output_dir) {
  const fs::path relative = absolute_normal(output_dir).lexically_relative(absolute_normal(pipeline_folder));
  return relative.empty() ? output_dir : relative.string();
}

fs::path pipeline_record_path_in(const fs::path& folder) { return folder / "pipeline.json"; }

void write_pipeline_record(const fs::path& folder, const PipelineRecord& record) {
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const PipelineStageRecord& s : record.stages) {
    stages.push_back({{"command", s.command}, {"title", s.title}, {"config", s.config}, {"output_dir", s.output_dir},
                      {"folder", s.folder}, {"eval_file", s.eval_file}, {"reused", s.reused}, {"state", s.state}});
  }
  const nlohmann::ordered_json json = {
      {"format", kFormat}, {"version", kVersion}, {"config", record.config}, {"stages", stages}};
  write_file_atomic(pipeline_record_path_in(folder), json.dump(2) + "\n");
}

std::optional<PipelineRecord> read_pipeline_record(const fs::path& folder) {
  const fs::path path = pipeline_record_path_in(folder);
  if (!fs::is_regular_file(path)) return std::nullopt;
  const auto json = nlohmann::json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return InputError(path.string() + ": " + why + "; `ferry pipeline` writes this file (run it again, or delete the file)");
  };
  if (json.is_discarded() || !json.is_object()) throw bad("not a JSON object");
  PipelineRecord record;
  try {
    if (json.value("format", "") != kFormat) throw bad("no \"format\": \"" + std::string(kFormat) + "\"");
    if (json.value("version", 0) != kVersion) throw bad("version " + json.at("version").dump() + " (this Ferry reads 1)");
    record.config = json.value("config", "");
    for (const auto& s : json.at("stages")) {
      PipelineStageRecord stage;
      stage.command = s.at("command").get<std::string>();
      stage.title = s.value("title", "");
      stage.config = s.value("config", "");
      stage.output_dir = s.at("output_dir").get<std::string>();
      stage.folder = s.at("folder").get<std::string>();
      stage.eval_file = s.value("eval_file", "");
      stage.reused = s.value("reused", false);
      stage.state = s.value("state", "planned");
      record.stages.push_back(std::move(stage));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("unexpected content (") + e.what() + ")");
  }
  return record;
}

}  // namespace ferry::cli
