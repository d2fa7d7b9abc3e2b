// The `ferry` subcommands, one add_* function per command family; each lives in its own file.
// Commands throw ferry errors; run_cli (app.h) maps them to messages and exit codes.
#pragma once

namespace CLI {
class App;
}

namespace ferry::cli {

// Thrown by a command whose outcome is an exit status of its own (ferry launch: its processes'),
// after it has said why; run_cli returns the code.
struct CommandExit {
  int code = 1;
};

void add_train_commands(CLI::App& app);     // train-sft, train-rm, train-dpo, train-kto, train-distill, train-ppo, train-grpo
void add_pipeline_command(CLI::App& app);   // pipeline
void add_generate_command(CLI::App& app);   // generate
void add_eval_command(CLI::App& app);       // eval
void add_score_command(CLI::App& app);      // score
void add_plan_command(CLI::App& app);       // plan
void add_report_command(CLI::App& app);     // report
void add_export_command(CLI::App& app);     // export
void add_config_command(CLI::App& app);     // config show, config keys, config import
void add_config_import_command(CLI::App* config);  // config import (command_config_import.cpp)
void add_version_command(CLI::App& app);    // version
void add_launch_command(CLI::App& app);     // launch

}  // namespace ferry::cli
