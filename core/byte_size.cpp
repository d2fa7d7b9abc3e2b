// Parsing and printing of memory sizes ("8GiB").
#include "core/byte_size.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <utility>

#include "core/text.h"

namespace ferry {
namespace {

constexpr std::array<std::pair<std::string_view, double>, 13> kUnits{{
    {"B", 1.0},
    {"KiB", 1024.0}, {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024}, {"TiB", 1024.0 * 1024 * 1024 * 1024},
    {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    {"K", 1024.0}, {"M", 1024.0 * 1024}, {"G", 1024.0 * 1024 * 1024}, {"T", 1024.0 * 1024 * 1024 * 1024},
}};

}  // namespace

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  const std::string s = trim(text);
  if (s.empty()) return std::nullopt;
  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.')) ++pos;
  if (pos == 0) return std::nullopt;
  double number = 0;
  try {
    size_t used = 0;
    number = std::stod(s.substr(0, pos), &used);
    if (used != pos) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = trim(std::string_view(s).substr(pos));
  double scale = 1.0;
  if (!unit.empty()) {
    bool found = false;
    for (const auto& [name, factor] : kUnits) {
      if (unit.size() == name.size() && std::equal(unit.begin(), unit.end(), name.begin(),
                                                   [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
        // Case-insensitive, but "mb"/"MB" are decimal and "MiB" binary as written.
        scale = factor;
        found = true;
        break;
      }
    }
    if (!found) return std::nullopt;
  }
  const double bytes = number * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string format_byte_size(uint64_t bytes) {
  if (bytes == 0) return "0";
  constexpr std::array<std::pair<const char*, uint64_t>, 4> binary{{
      {"TiB", 1ull << 40}, {"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10}}};
  for (const auto& [name, factor] : binary) {
    if (bytes % factor == 0) return std::to_string(bytes / factor) + name;
  }
  return std::to_string(bytes);
}

std::string format_bytes_approx(uint64_t bytes) {
  constexpr std::array<const char*, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < names.size()) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.2f %s", value, names[unit]);
  return buf;
}

}  // namespace ferry
