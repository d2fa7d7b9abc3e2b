// The `ferry` executable.
#include "cli/app.h"

int main(int argc, char** argv) { return ferry::cli::run_cli(argc, argv); }
