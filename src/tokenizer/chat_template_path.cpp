// Finding a chat template file from the name a config gives.
#include "src/tokenizer/chat_template_path.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/text.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_file_path(const std::string& name) {
  return ends_with(name, ".yaml") || ends_with(name, ".yml") || ends_with(name, ".json");
}

void add_unique(std::vector<std::string>& dirs, const fs::path& dir) {
  const std::string s = dir.lexically_normal().string();
  if (std::find(dirs.begin(), dirs.end(), s) == dirs.end()) dirs.push_back(s);
}

std::vector<std::string> template_names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<std::string> chat_template_search_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("FERRY_TEMPLATES"); env && *env) add_unique(dirs, env);
  // The executable's folder and those above it: build/ferry finds <repo>/configs/templates as
  // ../configs/templates; build/tests/x finds it one level further up; an installed
  // <prefix>/bin/ferry finds <prefix>/configs/templates.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "configs" / "templates", ec)) {
        add_unique(dirs, dir / "configs" / "templates");
        break;
      }
      if (dir == dir.parent_path()) break;
    }
  }
  add_unique(dirs, fs::current_path(ec) / "configs" / "templates");
#ifdef FERRY_SOURCE_DIR
  add_unique(dirs, fs::path(FERRY_SOURCE_DIR) / "configs" / "templates");
#endif
  // This file's own location, when the compiler saw an absolute path (src/tokenizer/<file>).
  if (const fs::path self(__FILE__); self.is_absolute()) {
    add_unique(dirs, self.parent_path().parent_path().parent_path() / "configs" / "templates");
  }
  return dirs;
}

std::vector<std::string> shipped_chat_template_names() {
  std::vector<std::string> known;
  for (const auto& dir : chat_template_search_dirs()) {
    for (auto& name : template_names_in(dir)) {
      if (std::find(known.begin(), known.end(), name) == known.end()) known.push_back(name);
    }
  }
  std::sort(known.begin(), known.end());
  return known;
}

std::string find_chat_template(const std::string& name_or_path) {
  std::error_code ec;
  if (is_file_path(name_or_path)) {
    if (!fs::is_regular_file(name_or_path, ec)) {
      throw ConfigError("chat template file '" + name_or_path + "' does not exist (relative paths are relative to " +
                        fs::current_path(ec).string() + ")");
    }
    return name_or_path;
  }
  if (name_or_path.empty() || name_or_path.find('/') != std::string::npos) {
    throw ConfigError("chat template '" + name_or_path +
                      "': give a shipped template name (" + join(shipped_chat_template_names(), ", ") +
                      ") or a .yaml/.json file");
  }
  if (name_or_path == "auto") {  // resolve_chat_template (chat_template_resolve.h) handles it
    throw ConfigError("chat template 'auto' is recognised from a tokenizer folder's chat template, and there is none "
                      "here; name a shipped template (" + join(shipped_chat_template_names(), ", ") +
                      ") or a .yaml/.json file");
  }
  const auto dirs = chat_template_search_dirs();
  for (const auto& dir : dirs) {
    const fs::path candidate = fs::path(dir) / (name_or_path + ".yaml");
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  const std::vector<std::string> known = shipped_chat_template_names();
  throw ConfigError("unknown chat template '" + name_or_path + "'" + did_you_mean(name_or_path, known) +
                    "; known templates: " + (known.empty() ? std::string("none found") : join(known, ", ")) +
                    " (looked in " + join(dirs, ", ") + "; set FERRY_TEMPLATES to a folder of <name>.yaml files)");
}

}  // namespace ferry
