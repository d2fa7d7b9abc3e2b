// `ferry launch --nproc N -- COMMAND ARGS...`: a data-parallel run of N processes on this machine,
// as `torchrun --no-python --nproc-per-node N ferry COMMAND ARGS...` starts it (src/dist/launcher.h).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <climits>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "src/dist/launcher.h"

namespace ferry::cli {
namespace {

std::string this_executable() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw UserError("ferry launch: cannot find this program's path (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto options = std::make_shared<dist::LaunchOptions>();
  auto* command = app.add_subcommand(
      "launch", "Run a ferry command data-parallel in N processes on this machine (as torchrun does): "
                "ferry launch --nproc 2 -- train-sft --config F");
  command->add_option("--nproc", options->nproc, "processes to start (each is one rank)")->required();
  command->add_option("--master-addr", options->master_addr, "rendezvous address (rank 0 listens there)");
  command->add_option("--master-port", options->master_port, "rendezvous port (0: a free one)");
  command->add_option("--grace", options->grace_seconds,
                      "seconds the others get to stop on their own after one process fails, before they are "
                      "terminated");
  command->add_option("args", options->args, "the ferry command and its arguments, after --");
  command->callback([options] {
    options->executable = this_executable();
    const int code = dist::launch_processes(*options, std::cerr);
    if (code != 0) throw CommandExit{code};  // the failed process's status: 2 for its user errors
  });
}

}  // namespace ferry::cli
