// rsvg-convert found on PATH and run on one SVG at a time (see svg_to_png.h).
#include "cli/svg_to_png.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"

extern char** environ;

namespace ferry::cli {

namespace fs = std::filesystem;

fs::path find_rsvg_convert() {
  const char* path = std::getenv("PATH");
  std::stringstream folders(path ? path : "");
  for (std::string folder; std::getline(folders, folder, ':');) {
    const fs::path candidate = fs::path(folder.empty() ? "." : folder) / "rsvg-convert";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

void require_rsvg_convert() {
  if (!find_rsvg_convert().empty()) return;
  throw InputError("--png rasterises the charts with rsvg-convert (librsvg), which is not on PATH; install it with\n"
                   "  sudo apt-get install librsvg2-bin\n"
                   "or leave out --png (the HTML report needs nothing)");
}

void write_png_from_svg(const std::string& svg, const fs::path& png) {
  require_rsvg_convert();
  const fs::path program = find_rsvg_convert();
  const fs::path source = fs::path(png.string() + ".svg.tmp");
  write_file_atomic(source, svg);
  std::vector<std::string> args = {program.string(), "--format", "png", "--output", png.string(), source.string()};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv.data(), environ);
  int status = 0;
  if (spawned == 0) ::waitpid(pid, &status, 0);
  std::error_code ignored;
  fs::remove(source, ignored);
  if (spawned != 0) {
    throw InputError("cannot run " + program.string() + " for " + png.string() + ": " + std::strerror(spawned));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw InputError(program.string() + " failed writing " + png.string() + " (" +
                     (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                        : "killed by signal " + std::to_string(WTERMSIG(status))) +
                     "); its message is above");
  }
}

}  // namespace ferry::cli
