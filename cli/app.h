// The `ferry` command line: builds the CLI11 app, runs the chosen command and turns errors into
// messages and exit codes (0 ok, 2 user error, 1 internal error). main() only calls run_cli.
#pragma once

namespace ferry::cli {

int run_cli(int argc, char** argv);

}  // namespace ferry::cli
