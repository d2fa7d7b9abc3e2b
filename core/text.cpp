// String helpers: edit distance, closest match, join, trim.
#include "core/text.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace ferry {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitute = diagonal + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {
    size_t d = edit_distance(word, candidate);
    // A candidate that contains the word (or vice versa) is a good suggestion too: "lr" -> "learning_rate"
    // is not, but "rank" -> "lora_rank" is.
    if (word.size() >= 3 && (candidate.find(word) != std::string::npos || word.find(candidate) != std::string_view::npos)) {
      d = std::min<size_t>(d, 1);
    }
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  // Allow roughly one edit per three characters, at least two.
  const size_t allowed = std::max<size_t>(2, word.size() / 3);
  return best_distance <= allowed ? best : std::string();
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = closest_match(word, candidates);
  return match.empty() ? std::string() : " (did you mean '" + match + "'?)";
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string shorten(std::string_view text, size_t limit) {
  return text.size() <= limit ? std::string(text) : std::string(text.substr(0, limit)) + "...";
}

std::string trim(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return std::string(s.substr(begin, end - begin));
}

}  // namespace ferry
