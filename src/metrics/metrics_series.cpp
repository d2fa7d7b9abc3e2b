// metrics.jsonl rows regrouped by key (see metrics_series.h).
#include "src/metrics/metrics_series.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "core/file_util.h"

namespace ferry {

const Series* MetricsSeries::find(std::string_view name) const {
  for (const Series& s : series) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

MetricsSeries parse_metrics_series(std::string_view text, const std::string& source) {
  MetricsSeries result;
  std::unordered_map<std::string, size_t> index;  // key -> position in result.series
  size_t line_number = 0;
  for (size_t begin = 0; begin < text.size();) {
    ++line_number;
    const size_t newline = text.find('\n', begin);
    if (newline == std::string_view::npos) break;  // a row still being written by a live run
    const std::string_view line = text.substr(begin, newline - begin);
    begin = newline + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = source + ":" + std::to_string(line_number);
    const auto row = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object()) {
      throw InputError(where + ": not a JSON object; metrics.jsonl holds one object per line "
                       "(fix or delete that line)");
    }
    const auto step = row.find("step");
    if (step == row.end() || !step->is_number_integer()) {
      throw InputError(where + ": row has no integer \"step\" (fix or delete that line)");
    }
    const int64_t step_value = step->get<int64_t>();
    result.last_step = std::max(result.last_step, step_value);
    ++result.rows;
    for (const auto& [key, value] : row.items()) {
      if (key == "step") continue;
      if (!value.is_number() && !value.is_null()) {
        throw InputError(where + ": \"" + key + "\" is " + value.type_name() +
                         ", not a number or null (fix or delete that line)");
      }
      auto [it, added] = index.try_emplace(key, result.series.size());
      if (added) result.series.push_back(Series{key, {}, {}});
      Series& series = result.series[it->second];
      if (value.is_null()) {
        series.non_finite_steps.push_back(step_value);
      } else {
        series.points.push_back({step_value, value.get<double>()});
      }
    }
  }
  return result;
}

MetricsSeries read_metrics_series(const std::filesystem::path& path) {
  return parse_metrics_series(read_file(path), path.string());
}

}  // namespace ferry
