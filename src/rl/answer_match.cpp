// Exact-match judging of answers (see answer_match.h).
#include "src/rl/answer_match.h"

#include "src/core/text.h"

namespace ferry {

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

}  // namespace ferry
