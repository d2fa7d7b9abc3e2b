// What a finished run leaves in its output.dir, read back by tests: the rows of metrics.jsonl and
// the figures of result.json. Header-only; shared by unit and integration tests.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ferry_test {

inline std::vector<nlohmann::json> metrics_rows(const std::filesystem::path& output) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(output / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

// The values of `key` in the rows of a jsonl file (metrics.jsonl, `ferry score`'s output) that
// have it, in order.
inline std::vector<double> jsonl_values(const std::filesystem::path& file, const std::string& key) {
  std::vector<double> values;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json row = nlohmann::json::parse(line);
    if (row.contains(key) && row.at(key).is_number()) values.push_back(row.at(key).get<double>());
  }
  return values;
}

inline nlohmann::json result_figures(const std::filesystem::path& output) {
  std::ifstream in(output / "result.json");
  return nlohmann::json::parse(in).at("figures");
}

}  // namespace ferry_test
