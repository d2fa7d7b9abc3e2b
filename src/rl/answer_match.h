// Whether an answer is right on a verifiable task: the response, stripped of surrounding
// whitespace and of the end-of-assistant marker, equals gt_answer exactly (data/README.md).
// `ferry eval`, the RL stages' held-out evaluation and (with GRPO) verifier rewards judge alike.
#pragma once

#include <string>

namespace ferry {

// The response as judged: surrounding whitespace and a trailing end-of-assistant marker removed.
std::string normalise_answer(std::string text, const std::string& end_marker);

bool exact_match(const std::string& response, const std::string& gt_answer, const std::string& end_marker);

}  // namespace ferry
