// A reward computed by a program the user writes: started once (/bin/sh -c COMMAND), fed one JSON
// line per response on stdin and answering one number per line on stdout, in order. Each line holds
// "prompt" (the last user message, or the text prompt), "response" (the answer's text),
// "gt_answer" (when the row has one), "completion" (the answer as TRL gives it to a reward
// function: text for a text prompt, else [{"role": "assistant", "content": ...}]) and "row" (the
// prompt row with every column, as TRL's **kwargs; docs/data.md shows a TRL reward function behind
// a three-line wrapper). Ferry writes and reads at once (poll), so neither side can block the
// other on a full pipe. A program that exits, answers something that is not a number, or stays
// silent past the time-out ends the run with a RewardCommandError naming the command and the
// prompt being scored; it is never waited on forever. "nan" and "inf" are numbers: the response
// is then left out of learning and counted, like any non-finite reward.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/child_process.h"
#include "core/error.h"

namespace ferry::rl {

class RewardCommandError : public UserError {
 public:
  using UserError::UserError;
};

class RewardCommand {
 public:
  // Starts `command`; `timeout_seconds` bounds the wait for each answer.
  RewardCommand(std::string command, double timeout_seconds);
  ~RewardCommand();
  RewardCommand(const RewardCommand&) = delete;
  RewardCommand& operator=(const RewardCommand&) = delete;

  // One answer per line of `requests` (each a JSON object without a newline); `describe(i)` names
  // request i in error messages (e.g. the prompt and its line in the prompt file).
  template <class Describe>
  std::vector<double> score(const std::vector<std::string>& requests, Describe describe) {
    std::vector<double> answers;
    std::string failure;
    size_t failed_at = 0;
    if (!exchange(requests, answers, failure, failed_at)) {
      throw RewardCommandError("reward command `" + command_ + "`: " + failure + " (scoring the response to " +
                               describe(failed_at) + ")");
    }
    return answers;
  }

  const std::string& command() const { return command_; }

 private:
  // Writes every request and reads every answer; false with `failure` and the request's index on error.
  bool exchange(const std::vector<std::string>& requests, std::vector<double>& answers, std::string& failure,
                size_t& failed_at);
  // `failure`, with the program's stderr tail when it wrote any, and the program stopped.
  bool fail(std::string& failure, std::string what);

  std::string command_;
  double timeout_seconds_;
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace ferry::rl
