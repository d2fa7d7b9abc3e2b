// Small string helpers shared by config parsing and the CLI: edit distance for "did you mean"
// suggestions, joining, trimming.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ferry {

// Levenshtein distance (insert, delete, substitute; each costs 1).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" — ready to append to an error message.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string trim(std::string_view s);
// `text`, or its first `limit` bytes and "..." when longer (for quoting input in error messages).
std::string shorten(std::string_view text, size_t limit);

}  // namespace ferry
