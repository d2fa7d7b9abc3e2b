// Reading, overriding, checking and printing a Config.
//
// Parsing is strict: an unknown key is an error naming the file, line and key path with the
// closest valid key; a value of the wrong type names the key and the expected type. JSON files
// are read by the same YAML parser (JSON is YAML), so both get line numbers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.h"

namespace ferry {

// Reads `path` (YAML or JSON), applies `overrides` ("section.key=value", in order), checks value
// ranges. Throws ConfigError.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Parses config text; `source` names it in error messages (a file name). Defaults fill the rest.
Config parse_config(std::string_view text, const std::string& source);

// Applies one "section.key=value" override; the value is read as YAML ("[a, b]" is a list).
void apply_override(Config& config, std::string_view assignment);

// Range and consistency checks that a single key's type cannot express. Throws ConfigError.
void validate_config(const Config& config);

// The resolved config as YAML, every key present, each with its one-line description.
std::string config_to_yaml(const Config& config);

// Writes config_to_yaml into `dir`/config.yaml (temporary file, then rename).
void save_resolved_config(const Config& config, const std::string& dir);

// Every key path ("train.learning_rate", ...), for documentation and suggestions.
std::vector<std::string> config_key_paths();

}  // namespace ferry
