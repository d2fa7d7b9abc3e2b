// The two sides of `ferry config import`: the keys of another tool's YAML config (TRL's CLI,
// Axolotl, LLaMA-Factory), read once each and remembered as used, and the Ferry keys written from
// them, each with the comment lines that say how a value was converted. What is never used ends
// up in the unmapped list with a reason. The tool tables (config_import_*.cpp) sit on top.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/config/config_import.h"

namespace ferry {

class ForeignConfigMapper {
 public:
  // `root` must be a mapping; `nested` names its sections whose keys are read as "section.key"
  // (Axolotl's `trl:`); `file` and `tool` name them in messages and comments.
  ForeignConfigMapper(const YAML::Node& root, std::string file, std::string tool,
                      const std::set<std::string>& nested = {});

  const std::string& file() const { return file_; }
  const std::string& tool() const { return tool_; }

  // --- the other tool's keys. Each reader marks the key used; absent or null reads as nullopt.
  // A value of the wrong type is a ConfigError naming the file, line and key.
  bool has(const std::string& key) const;
  std::optional<std::string> text(const std::string& key);
  std::optional<double> number(const std::string& key);
  std::optional<int64_t> integer(const std::string& key);  // 3 or 3.0; 3.5 is an error
  std::optional<bool> flag(const std::string& key);        // YAML 1.1 spellings too (yes, on)
  // A list of strings, or one string split at commas ("q_proj,v_proj").
  std::optional<std::vector<std::string>> names(const std::string& key);
  // The raw node (marks the key used); nullptr when absent.
  const YAML::Node* node(const std::string& key);
  // The line of `key` in the file ("FILE:12"), for messages.
  std::string where(const std::string& key) const;

  // Marks `key` used without writing anything (it means what Ferry does anyway).
  void consume(const std::string& key);
  // When `key` is present: used, and listed as unmapped with `reason`.
  void unmapped(const std::string& key, const std::string& reason);
  // Lists `label` as unmapped whether or not it is a key of the file ("datasets[1]").
  void unmapped_part(const std::string& label, const std::string& reason);
  // The text of `key` without marking it used (nullopt when absent, null or not a scalar).
  std::optional<std::string> peek(const std::string& key) const;
  // When `key` is present with another value than `harmless` (as numbers when both are, else as
  // lower-case text): listed as unmapped; else only consumed.
  void unmapped_unless(const std::string& key, const std::string& harmless, const std::string& reason);

  // --- the Ferry keys ("train.learning_rate"). A later set() replaces the value; a non-empty
  // `comment` replaces the comment lines, which stand above the key.
  void set(const std::string& ferry_key, int64_t value, const std::string& comment = "");
  void set(const std::string& ferry_key, double value, const std::string& comment = "");
  void set(const std::string& ferry_key, bool value, const std::string& comment = "");
  void set(const std::string& ferry_key, const std::string& value, const std::string& comment = "");
  void set(const std::string& ferry_key, const char* value, const std::string& comment = "");
  void set(const std::string& ferry_key, const std::vector<std::string>& value, const std::string& comment = "");
  void set(const std::string& ferry_key, const std::vector<double>& value, const std::string& comment = "");
  // A value already written as YAML (flow style), e.g. "[{kind: verifier, match: numeric}]".
  void set_yaml(const std::string& ferry_key, const std::string& yaml, const std::string& comment = "");
  // Adds a comment line above a key already set (or to be set).
  void comment(const std::string& ferry_key, const std::string& comment);
  bool is_set(const std::string& ferry_key) const;
  // A line for the header comment block.
  void note(const std::string& line);

  // The Ferry YAML (header, then the keys in Ferry's own order) and the unmapped keys in the order
  // they appear in the file; keys never read are listed with `reason_for(key)`.
  ImportedConfig finish(Stage stage, std::string (*reason_for)(const std::string& key));

 private:
  struct Entry {
    std::string value;                  // YAML text
    std::vector<std::string> comments;  // lines, without "# "
  };
  void put(const std::string& ferry_key, std::string value, const std::string& comment);
  const YAML::Node* lookup(const std::string& key) const;

  std::string file_, tool_;
  std::vector<std::pair<std::string, YAML::Node>> keys_;  // in file order, nested ones flattened
  std::set<std::string> used_;
  std::vector<UnmappedKey> unmapped_;
  std::map<std::string, Entry> entries_;
  std::vector<std::string> notes_;
};

// A number as the shortest text that reads back the same ("2e-05", "0.1", "3.0").
std::string number_text(double value);
// A string as a YAML scalar (quoted when it must be).
std::string yaml_scalar(const std::string& value);

}  // namespace ferry
