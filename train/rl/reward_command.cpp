// The reward command process (see reward_command.h).
#include "train/rl/reward_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "core/text.h"

namespace ferry::rl {
namespace {

// A whole line that strtod reads completely, surrounding whitespace allowed.
bool parse_answer(const std::string& line, double& out) {
  const std::string text = trim(line);
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

}  // namespace

RewardCommand::RewardCommand(std::string command, double timeout_seconds)
    : command_(std::move(command)), timeout_seconds_(timeout_seconds) {
  try {
    child_ = std::make_unique<ChildProcess>(command_);
  } catch (const ChildProcessError& e) {
    throw RewardCommandError(std::string("reward command ") + e.what());
  }
}

RewardCommand::~RewardCommand() = default;

bool RewardCommand::fail(std::string& failure, std::string what) {
  failure = std::move(what);
  const std::string tail = child_ != nullptr ? child_->stderr_tail() : std::string();
  if (!tail.empty()) failure += "; its stderr ends with: " + shorten(tail, 400);
  child_.reset();
  return false;
}

bool RewardCommand::exchange(const std::vector<std::string>& requests, std::vector<double>& answers,
                             std::string& failure, size_t& failed_at) {
  using Clock = std::chrono::steady_clock;
  answers.clear();
  if (requests.empty()) return true;
  if (child_ == nullptr || child_->broken()) return fail(failure, "the program is no longer running");
  for (const std::string& r : requests) child_->write(r + "\n");
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
  auto deadline = Clock::now() + timeout;
  std::string line;
  while (answers.size() < requests.size()) {
    failed_at = answers.size();
    if (child_->pop_line(line)) {
      double value = 0;
      if (!parse_answer(line, value)) {
        return fail(failure, "answered '" + shorten(line, 80) + "', not a number; it must print one number per input line");
      }
      answers.push_back(value);
      deadline = Clock::now() + timeout;
      continue;
    }
    if (child_->broken()) {
      const char* what = child_->unwritten() > 0 ? "it stopped reading its input (" : "it ended before answering (";
      return fail(failure, what + child_->exit_description() + ")");
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return fail(failure, "no answer within " + detail::concat(timeout_seconds_) +
                               " s (rewards[].timeout); the program was stopped");
    }
    child_->pump(static_cast<int>(std::min<int64_t>(left, 1000)));
  }
  return true;
}

}  // namespace ferry::rl
