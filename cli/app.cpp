// CLI entry: command registration and the single place where errors become exit codes.
#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "src/dist/communicator.h"

namespace ferry::cli {

int run_cli(int argc, char** argv) {
  dist::quiet_unless_primary();  // in a data-parallel run rank 0 reports
  CLI::App app{"Ferry: SFT, reward modelling, DPO and PPO on one small GPU, offloading to CPU memory", "ferry"};
  app.require_subcommand(1);
  app.fallthrough(false);
  add_train_commands(app);
  add_pipeline_command(app);
  add_generate_command(app);
  add_eval_command(app);
  add_score_command(app);
  add_plan_command(app);
  add_report_command(app);
  add_export_command(app);
  add_config_command(app);
  add_version_command(app);
  add_launch_command(app);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and usage
    return 2;
  } catch (const UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const c10::OutOfMemoryError& e) {
    const std::string what = e.what_without_backtrace();
    std::cerr << "error: the GPU ran out of memory: " << what.substr(0, what.find('\n')) << "\n"
              << "Give the run less to hold: offload.policy auto (or optimizer / params), a smaller "
                 "train.micro_batch_size or data.max_length, train.gradient_checkpointing: true, or a larger "
                 "offload.gpu_memory if it is set below the GPU's memory; `ferry plan --config F` shows the "
                 "estimate per policy.\n";
    return 2;
  } catch (const CommandExit& e) {
    return e.code;
  } catch (const PeerError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const Interrupted& e) {
    std::cerr << e.what() << "\n";
    return 128 + e.signal_number();
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n"
              << "This is a bug in Ferry; please report it with the command you ran.\n";
    return 1;
  }
}

}  // namespace ferry::cli
