// Test hooks for crash and disk-full testing, read from the environment variable FERRY_FAILPOINT
// (unset in normal runs, which then pay one check per file written):
//   write:trace      every file Ferry writes is printed to stderr as "ferry failpoint: write K PATH"
//                    (K counts this process's files from 1), so a test can choose a K;
//   write:K:kill     the K-th file is killed halfway: half its first write lands in the temporary
//                    file, then the process sends itself SIGKILL (a crash mid-save);
//   write:K:enospc   the K-th file's write fails halfway as if the disk were full (ENOSPC);
//   write@TEXT:kill, write@TEXT:enospc
//                    the same for the first file whose path contains TEXT (a checkpoint is written
//                    into ".step-N.tmp-PID/", the final model into ".final.tmp-PID/").
// scripts/kill-test.sh and tests/integration/train_crash_consistency_test.cpp use them.
#pragma once

#include <filesystem>

namespace ferry {

enum class WriteFailure { none, kill, no_space };

// Called once for each file Ferry opens to write (AtomicFileWriter): counts it, traces it, and
// says what FERRY_FAILPOINT wants its writes to do. A malformed FERRY_FAILPOINT is a ConfigError.
WriteFailure file_write_failpoint(const std::filesystem::path& path);

}  // namespace ferry
