// pipeline.json: what `ferry pipeline` ran, written into the pipeline's folder so that
// `ferry report FOLDER` can find the stages again (and show them while the pipeline runs):
//   {"format": "ferry-pipeline", "version": 1, "config": "configs/demo.yaml",
//    "stages": [{"command": "train-sft", "title": "supervised fine-tuning", "config": "configs/demo-sft.yaml",
//                "output_dir": "runs/demo/sft", "folder": "sft", "eval_file": "...", "reused": false,
//                "state": "done"}, ...]}
// "output_dir" is the stage's output.dir as configured (the summary table shows it); "folder" is the
// same place relative to pipeline.json's folder, so the record still works from another working
// folder or after the whole folder is moved. "state" is "planned", "running" or "done".
//
// The pipeline's folder is the deepest folder holding every stage's output.dir (runs/demo for the
// demo's runs/demo/{sft,rm,ppo}; a one-stage pipeline: the parent of its output.dir).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ferry::cli {

struct PipelineStageRecord {
  std::string command;     // "train-sft"
  std::string title;       // "supervised fine-tuning"
  std::string config;      // the stage's config file
  std::string output_dir;  // as configured
  std::string folder;      // relative to the pipeline folder
  std::string eval_file;   // the stage's data.eval_file
  bool reused = false;
  std::string state = "planned";
};

struct PipelineRecord {
  std::string config;  // the pipeline's config file
  std::vector<PipelineStageRecord> stages;
};

// The folder a pipeline with these stage output dirs writes pipeline.json and report.html into,
// as a path relative to the working folder when it is inside it, else absolute.
std::filesystem::path pipeline_folder(const std::vector<std::string>& stage_output_dirs);

// `output_dir` relative to `pipeline_folder` (for PipelineStageRecord::folder).
std::string folder_in_pipeline(const std::filesystem::path& pipeline_folder, const std::string& output_dir);

std::filesystem::path pipeline_record_path_in(const std::filesystem::path& folder);

// Writes FOLDER/pipeline.json atomically. InputError when it cannot.
void write_pipeline_record(const std::filesystem::path& folder, const PipelineRecord& record);

// FOLDER/pipeline.json, nullopt when there is none; InputError naming it when it is not one.
std::optional<PipelineRecord> read_pipeline_record(const std::filesystem::path& folder);

}  // namespace ferry::cli
