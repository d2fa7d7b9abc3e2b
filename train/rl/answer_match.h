// Whether an answer is right on a verifiable task: the response, stripped of surrounding
// whitespace and of the end-of-assistant marker, equals gt_answer exactly (data/README.md).
// `ferry eval`, the RL stages' held-out evaluation and verifier rewards judge alike; verifier
// rewards may also compare numbers or look for the answer anywhere in the response.
#pragma once

#include <optional>
#include <string>

#include "core/config/config_enum.h"

namespace ferry::rl {

// The response as judged: surrounding whitespace and a trailing end-of-assistant marker removed.
std::string normalise_answer(std::string text, const std::string& end_marker);

bool exact_match(const std::string& response, const std::string& gt_answer, const std::string& end_marker);

// The last number written in `text` ("-12", "3.5", "1,234", "2e3"), if any.
std::optional<double> last_number(const std::string& text);

// exact: exact_match; numeric: the response's last number equals gt_answer's value to 1e-6
// (relative above 1); contains: the normalised gt_answer appears in the response.
bool answer_matches(const std::string& response, const std::string& gt_answer, AnswerMatch match,
                    const std::string& end_marker);

}  // namespace ferry::rl
