// Accuracy overall and per kind (see accuracy_tally.h).
#include "cli/accuracy_tally.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace ferry::cli {
namespace {

std::string fraction(const std::pair<int64_t, int64_t>& counts) {
  std::ostringstream out;
  out << counts.first << "/" << counts.second << " = " << std::fixed << std::setprecision(1)
      << 100.0 * static_cast<double>(counts.first) / static_cast<double>(std::max<int64_t>(counts.second, 1)) << "%";
  return out.str();
}

}  // namespace

void AccuracyTally::add(const nlohmann::ordered_json& line, bool correct) {
  total_.first += correct ? 1 : 0;
  ++total_.second;
  const auto kind = line.find("kind");
  if (kind != line.end() && kind->is_string()) {
    auto& counts = kinds_[kind->get<std::string>()];
    counts.first += correct ? 1 : 0;
    ++counts.second;
  }
}

void AccuracyTally::print(std::ostream& out, const std::string& title) const {
  out << title << ": " << fraction(total_) << "\n";
  for (const auto& [kind, counts] : kinds_) out << "  " << kind << ": " << fraction(counts) << "\n";
}

}  // namespace ferry::cli
