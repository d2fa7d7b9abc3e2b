// What `ferry report` reads from one run's output.dir: metrics.jsonl as series (metrics_series.h),
// the steps it was resumed from (resumes.jsonl, resume_log.h), the resolved config (config.yaml,
// as written), the memory plan the run set its engine up with (memory_plan.txt) and result.json (train/stage_result.h writes it at the end: the stage, its figures
// with the memory peaks, its data files). Only metrics.jsonl must exist; a live run has no
// result.json yet.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/metrics/metrics_series.h"

namespace ferry {

struct RunRecord {
  std::filesystem::path dir;
  MetricsSeries metrics;
  std::vector<int64_t> resume_steps;  // ascending
  std::string config_yaml;            // empty when config.yaml is missing
  std::string memory_plan;            // memory_plan.txt (train/run_engine.h writes it); empty when missing
  nlohmann::json result;              // result.json; null when missing

  // "sft", "ppo", ...: result.json's stage, else config.yaml's `stage:` line, else "".
  std::string stage() const;
};

// True when `dir` holds a metrics.jsonl.
bool holds_metrics(const std::filesystem::path& dir);

// Reads a run folder. InputError naming the folder when it has no metrics.jsonl, and naming the
// file (and line) when metrics.jsonl, resumes.jsonl or result.json cannot be parsed.
RunRecord read_run_record(const std::filesystem::path& dir);

}  // namespace ferry
