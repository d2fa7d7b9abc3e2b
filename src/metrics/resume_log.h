// <output.dir>/resumes.jsonl: where a run was resumed from a checkpoint, one line per resume,
//   {"step":500,"unix_time":1765000000.0}
// "step" is the checkpoint's step (the resumed run logs step + 1 next). MetricsLogger keeps it next
// to metrics.jsonl and under the same rule: on every start, lines after the step it starts from
// are dropped (all of them on a fresh start), so the file says how the rows of metrics.jsonl came
// to be. `ferry report` draws a marker at each step (metrics.jsonl itself has no trace of a
// resume: its rows after the checkpoint are cut and written again).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace ferry {

std::filesystem::path resume_log_path_in(const std::filesystem::path& output_dir);

// At the start of a run: drops the lines after `resume_step` (every line when nullopt, a fresh
// start) and, when resuming, appends one for `resume_step`. Throws InputError when it cannot write.
void update_resume_log(const std::filesystem::path& output_dir, std::optional<int64_t> resume_step, double unix_time);

// The steps a run in `output_dir` was resumed from, ascending, each once; empty when the file is
// missing. InputError naming file:line for a line that is not {"step": integer, ...}.
std::vector<int64_t> read_resume_steps(const std::filesystem::path& output_dir);

}  // namespace ferry
