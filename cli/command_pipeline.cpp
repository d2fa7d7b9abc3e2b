// `ferry pipeline --config F [--force]`: runs the stage configs listed in `pipeline.stages` in order
// (the demo: SFT -> RM -> PPO), each reading the previous stage's final/ (as its config says).
// Every stage config is read and checked before the first one runs, so a typo in the last stage
// fails in seconds, not after hours of SFT. A stage whose output.dir holds final/ and a
// result.json written by a run of the same resolved config and the same data files is reused, not
// rerun, as long as every stage before it was reused too (--force reruns every stage); an
// interrupted stage resumes with --set train.resume=auto. Ends with a summary
// table (pipeline_summary.h) and the report page (run_report.h). Both go to the pipeline's folder,
// the deepest folder holding every stage's output.dir (runs/demo for the demo): pipeline.json
// (pipeline_record.h: the stages and how far they got, rewritten as each starts and ends, so
// `ferry report --watch FOLDER` follows a running pipeline) and report.html.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <yaml-cpp/yaml.h>
#include <memory>

#include "cli/commands.h"
#include "cli/config_args.h"
#include "cli/pipeline_record.h"
#include "cli/pipeline_summary.h"
#include "cli/run_report.h"
#include "core/config/config_io.h"
#include "core/error.h"
#include "core/file_util.h"
#include "src/dist/communicator.h"
#include "stages/stage_registry.h"
#include "train/stage_result.h"

namespace ferry::cli {
namespace {

struct PlannedStage {
  std::string path;
  Config config;
};

// The value of `key` ("train.learning_rate") in a resolved config, as its YAML text.
std::string config_value(const Config& config, const std::string& key) {
  YAML::Node node = YAML::Load(config_to_yaml(config));
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
    node = node[key.substr(start, dot - start)];
    if (!node || !node.IsMap()) return {};
  }
  const YAML::Node value = node[key.substr(start)];
  if (!value) return {};
  YAML::Emitter out;
  out << YAML::Flow << value;
  return out.c_str();
}

// `--set` on a pipeline sets a key in every stage: say so where the stages' own configs differ
// (a learning rate right for SFT is rarely right for PPO).
void warn_flattened_overrides(const std::vector<std::string>& stage_paths, const std::vector<std::string>& overrides) {
  std::vector<Config> own;
  for (const auto& path : stage_paths) own.push_back(load_config(path));
  for (const std::string& assignment : overrides) {
    const std::string key = assignment.substr(0, assignment.find('='));
    std::string values;
    bool differ = false;
    for (size_t i = 0; i < own.size(); ++i) {
      const std::string value = config_value(own[i], key);
      if (i > 0 && value != config_value(own[0], key)) differ = true;
      values += (i ? ", " : "") + stage_paths[i] + ": " + value;
    }
    if (differ) {
      std::cerr << "warning: --set " << assignment << " sets " << key << " in every stage, where the stages set it "
                << "differently (" << values << "); to change one stage, edit its file or run that stage alone\n";
    }
  }
}

struct PipelineArgs {
  ConfigArgs config;
  bool force = false;
};

void run_pipeline(const PipelineArgs& pipeline_args) {
  const ConfigArgs& args = pipeline_args.config;
  const Config pipeline = resolve_config(args);
  if (pipeline.pipeline.stages.empty()) {
    throw ConfigError(args.path + ": pipeline.stages is empty; list the stage config files to run, e.g.\n"
                      "  pipeline:\n    stages: [configs/demo-sft.yaml, configs/demo-rm.yaml, configs/demo-ppo.yaml]");
  }
  // --set overrides apply to every stage (e.g. --set train.device=cpu).
  warn_flattened_overrides(pipeline.pipeline.stages, args.overrides);
  std::vector<PlannedStage> planned;
  for (const auto& path : pipeline.pipeline.stages) {
    Config config = load_config(path, args.overrides);
    if (config.stage == Stage::any) {
      throw ConfigError(path + ": a pipeline stage config must say which stage it is (stage: sft|rm|dpo|ppo|grpo)");
    }
    planned.push_back({path, std::move(config)});
  }
  std::cout << "pipeline " << args.path << ": " << planned.size() << " stages\n";
  for (size_t i = 0; i < planned.size(); ++i) {
    const auto& info = stage_info(planned[i].config.stage);
    std::cout << "  " << i + 1 << ". " << info.command << "  " << planned[i].path << "  -> "
              << planned[i].config.output.dir << "\n";
  }
  // The pipeline's folder gets pipeline.json now and after each stage (rank 0 only); a folder that
  // cannot be written costs the report, not the run.
  const bool primary = dist::is_primary_process();
  std::vector<std::string> stage_dirs;
  for (const auto& stage : planned) stage_dirs.push_back(stage.config.output.dir);
  const std::filesystem::path folder = pipeline_folder(stage_dirs);
  PipelineRecord record{args.path, {}};
  for (const auto& stage : planned) {
    const auto& info = stage_info(stage.config.stage);
    record.stages.push_back({info.command, info.title, stage.path, stage.config.output.dir,
                             folder_in_pipeline(folder, stage.config.output.dir), stage.config.data.eval_file, false, "planned"});
  }
  auto save_record = [&] {
    if (!primary) return;
    try {
      write_pipeline_record(folder, record);
    } catch (const UserError& e) {
      std::cerr << "warning: " << e.what() << " (ferry report will not find this pipeline's stages)\n";
    }
  };
  save_record();
  std::vector<StageOutcome> outcomes;
  bool earlier_stage_ran = false;  // then every later stage runs: its input model changed
  for (size_t i = 0; i < planned.size(); ++i) {
    const Config& config = planned[i].config;
    const auto& info = stage_info(config.stage);
    std::cout << "\n== stage " << i + 1 << "/" << planned.size() << ": " << info.title << " (" << planned[i].path
              << ")\n" << std::flush;
    StageOutcome outcome{info.command, config.output.dir, nullptr, false, config.data.eval_file};
    std::string why_not;
    if (!pipeline_args.force && !earlier_stage_ran) outcome.figures = finished_stage_result(config, why_not);
    if (!outcome.figures.is_null()) {
      outcome.reused = true;
      std::cout << "reusing " << config.output.dir << "/final: it was made by this stage's config and data (--force reruns)\n";
    } else {
      if (!pipeline_args.force && earlier_stage_ran) why_not = "an earlier stage ran again";
      if (!why_not.empty()) std::cout << "running again (" << config.output.dir << ": " << why_not << ")\n";
      earlier_stage_ran = true;
      record.stages[i].state = "running";
      save_record();
      run_stage(config.stage, config);
      // In a data-parallel run rank 0 writes result.json (after the others have moved on) and reports.
      if (dist::is_primary_process()) outcome.figures = read_stage_figures(config);
    }
    record.stages[i].state = "done";
    record.stages[i].reused = outcome.reused;
    save_record();
    outcomes.push_back(std::move(outcome));
  }
  std::cout << "\npipeline finished\n";
  print_pipeline_summary(std::cout, outcomes);
  if (primary) {
    try {
      const WrittenReport report = write_report(folder, {});
      std::cout << "\nreport: " << report.html.string() << " (" << report.charts << " charts; `ferry report "
                << folder.string() << "` writes it again)\n";
    } catch (const UserError& e) {
      std::cerr << "warning: no report written: " << e.what() << "\n";
    }
  }
}

}  // namespace

void add_pipeline_command(CLI::App& app) {
  auto args = std::make_shared<PipelineArgs>();
  auto* command = app.add_subcommand("pipeline", "Run several stages in order (SFT -> RM -> PPO), from one config");
  add_config_options(command, args->config);
  command->add_flag("--force", args->force, "rerun every stage, even those already finished with the same config");
  command->callback([args] { run_pipeline(*args); });
}

}  // namespace ferry::cli
