// `ferry launch`: starts the processes of a data-parallel run on this machine the way torchrun
// does — the same program N times with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT set — for machines without Python. It forwards SIGINT and SIGTERM
// to them, and when one fails it names it, gives the others `grace_seconds` to stop on their own
// (they do as soon as a collective with the failed one breaks) and then terminates them: a failed
// process never leaves the run hanging.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace ferry::dist {

struct LaunchOptions {
  int64_t nproc = 2;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;     // 0: a free port on master_addr
  double grace_seconds = 30.0;
  std::string executable;      // the program to start (this ferry)
  std::vector<std::string> args;  // its arguments, e.g. {"train-sft", "--config", "f.yaml"}
};

// Runs the processes to the end. Returns 0 when every one exits 0; else the exit status of the
// first that failed (128 + signal when killed by one), after `log` has said which it was.
// UserError for nproc < 1 or no arguments.
int launch_processes(const LaunchOptions& options, std::ostream& log);

// A TCP port nobody listens on at `addr` now (bound and released).
int64_t free_port(const std::string& addr);

}  // namespace ferry::dist
