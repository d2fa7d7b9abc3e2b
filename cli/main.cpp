// The `ferry` executable.
#include "cli/app.h"
#include "cli/huge_pages.h"

int main(int argc, char** argv) {
  ferry::cli::enable_huge_pages();
  return ferry::cli::run_cli(argc, argv);
}
