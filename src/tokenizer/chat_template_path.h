// Where a chat template named in a config lives. A name ("demo") is looked up as <name>.yaml in,
// in order: $FERRY_TEMPLATES, <folder of the running executable>/../configs/templates, the
// working directory's configs/templates, and the source tree Ferry was built from. Anything ending
// in .yaml/.yml/.json is a file path, used as given.
#pragma once

#include <string>
#include <vector>

namespace ferry {

// The template file for `name_or_path`; throws ConfigError saying where it looked and which
// templates exist there.
std::string find_chat_template(const std::string& name_or_path);

// The folders searched for template names, in order (those that do not exist are included).
std::vector<std::string> chat_template_search_dirs();

// The names of the templates found there (<name>.yaml), sorted, for messages.
std::vector<std::string> shipped_chat_template_names();

}  // namespace ferry
