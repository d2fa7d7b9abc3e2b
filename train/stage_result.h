// output.dir/result.json, what a finished stage measured: written by every stage at its very end,
// read back by `ferry pipeline` for its summary and to reuse a stage that already finished.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "core/config/config.h"

namespace ferry {

// output.dir/result.json: what a finished stage measured, for `ferry pipeline`'s summary and reuse:
// {"stage", "config" (the resolved config as YAML: a rerun with another config does not reuse it),
// "inputs" (stage_input_fingerprints: a rerun after a data file changed does not reuse it either),
// "figures": {...}}. Written atomically at the very end of a run; run_stage removes it first.
inline constexpr const char* kStageResultFile = "result.json";
void write_stage_result(const Config& config, const std::string& figures_json);

// {path: file_fingerprint} of the data files a stage reads (data.train_file, eval_file and
// prompt_file, those set); a file that cannot be read maps to "".
nlohmann::json stage_input_fingerprints(const Config& config);

// result.json's figures when the stage already finished (output.dir/final exists) with this very
// config and these very data files, else null; `why_not` says what differs when there was a
// finished run. An unreadable result.json is null too (the stage runs again).
nlohmann::json finished_stage_result(const Config& config, std::string& why_not);

// result.json's figures, null when it is missing or unreadable.
nlohmann::json read_stage_figures(const Config& config);

}  // namespace ferry
