// Exact-match judging of answers (see answer_match.h).
#include "train/rl/answer_match.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/text.h"

namespace ferry::rl {

std::string normalise_answer(std::string text, const std::string& end_marker) {
  text = trim(text);
  if (!end_marker.empty()) {
    const std::string marker = trim(end_marker);
    if (!marker.empty() && text.size() >= marker.size() && text.ends_with(marker)) {
      text = trim(text.substr(0, text.size() - marker.size()));
    }
  }
  return text;
}

bool exact_match(const std::string& response, const std::string& gt_answer, const std::string& end_marker) {
  return normalise_answer(response, end_marker) == gt_answer;
}

std::optional<double> last_number(const std::string& text) {
  std::optional<double> found;
  const auto digit = [&](size_t i) { return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); };
  for (size_t i = 0; i < text.size();) {
    if (!digit(i) && !(text[i] == '.' && digit(i + 1))) {
      ++i;
      continue;
    }
    const size_t begin = (i > 0 && text[i - 1] == '-') ? i - 1 : i;
    std::string number;
    if (begin < i) number += '-';
    size_t j = i;
    for (; j < text.size(); ++j) {  // digits, thousands separators between digits, one decimal point
      const char c = text[j];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        number += c;
      } else if (c == ',' && digit(j + 1) && j > i) {
        continue;
      } else if (c == '.' && digit(j + 1) && number.find('.') == std::string::npos) {
        number += c;
      } else {
        break;
      }
    }
    if (j + 1 < text.size() && (text[j] == 'e' || text[j] == 'E')) {  // an exponent
      size_t k = j + 1;
      if (text[k] == '-' || text[k] == '+') ++k;
      if (digit(k)) {
        number += 'e';
        number += text.substr(j + 1, k - j - 1);
        for (; digit(k); ++k) number += text[k];
        j = k;
      }
    }
    found = std::strtod(number.c_str(), nullptr);
    i = j;
  }
  return found;
}

bool answer_matches(const std::string& response, const std::string& gt_answer, AnswerMatch match,
                    const std::string& end_marker) {
  switch (match) {
    case AnswerMatch::exact:
      return exact_match(response, gt_answer, end_marker);
    case AnswerMatch::numeric: {
      const std::optional<double> want = last_number(gt_answer), got = last_number(normalise_answer(response, end_marker));
      if (!want || !got) return false;
      return std::abs(*got - *want) <= 1e-6 * std::max(1.0, std::abs(*want));
    }
    case AnswerMatch::contains: {
      const std::string want = trim(gt_answer);
      return !want.empty() && normalise_answer(response, end_marker).find(want) != std::string::npos;
    }
  }
  return false;
}

}  // namespace ferry::rl
