// The environment programs of a multi-turn rollout (rollout.environment; the protocol is
// docs/environments.md): `env_workers` processes started by /bin/sh -c COMMAND, each serving many
// episodes. Ferry writes one JSON request per line ({"type": "reset" | "step" | "end",
// "episode": N, ...}) and a worker answers each with one JSON object per line, in order. An
// episode stays with the worker that got its reset (the worker holds its state).
//
// Faults end episodes, never the run: a worker that exits or closes its output (crash), does not
// answer within env_timeout seconds (timeout; the worker is killed) or answers a line that is not a
// JSON object, or {"error": ...} (malformed) ends the episode the answer was for; a dead worker's
// other episodes end with it, and the worker is started again for later episodes. Only a pool that
// cannot run at all (2 x env_workers starts in a row that died before answering anything) is an
// EnvironmentError naming the command and the tail of its stderr.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/child_process.h"
#include "core/error.h"

namespace ferry::rl {

class EnvironmentError : public UserError {
 public:
  using UserError::UserError;
};

enum class EnvFault { none, crash, timeout, malformed };
const char* env_fault_name(EnvFault fault);

// The answer to one request, or the fault that ended its episode.
struct EnvReply {
  int64_t episode = 0;
  EnvFault fault = EnvFault::none;
  nlohmann::ordered_json body;  // the JSON object answered (fault none)
  std::string error;            // what went wrong (a fault), for the log
  double seconds = 0;           // from the request's writing (or the previous answer) to this answer
};

class EnvironmentPool {
 public:
  EnvironmentPool(std::string command, int64_t workers, double timeout_seconds);
  ~EnvironmentPool();
  EnvironmentPool(const EnvironmentPool&) = delete;
  EnvironmentPool& operator=(const EnvironmentPool&) = delete;

  // Sends `request` (an object; "episode" is set to `episode`) to the episode's worker; an
  // episode's first request picks the worker with the fewest open episodes, (re)starting it if
  // needed. A request to a worker that has died is answered with a crash at the next poll.
  void send(int64_t episode, nlohmann::ordered_json request);
  // Answers and faults that have arrived, waiting up to `timeout_ms` for the first. Throws
  // EnvironmentError when the pool cannot run at all.
  std::vector<EnvReply> poll(int timeout_ms);
  // The episode is over: its worker no longer counts it.
  void close(int64_t episode);

  int64_t in_flight() const;  // requests sent and not yet answered
  // True when some worker's oldest request has waited more than twice the mean time an answer has
  // taken (and 50 ms): a slow or hanging environment, which episodes ready to generate should not
  // wait for.
  bool overdue() const;
  // Seconds until every request sent is answered, at the mean time an answer has taken (0 before
  // the first): the slowest worker's queue.
  double drain_seconds() const;
  const std::string& command() const { return command_; }

 private:
  struct Pending {
    int64_t episode = 0;
    double since = 0;  // when it became the oldest unanswered request of its worker
  };
  struct Worker {
    std::unique_ptr<ChildProcess> process;
    std::deque<Pending> pending;
    int64_t open_episodes = 0;
    int64_t answers = 0;      // answers this process has given
    int64_t incarnation = 0;  // processes started in this slot
  };
  struct Assignment {
    size_t worker = 0;
    int64_t incarnation = 0;  // the process that holds the episode's state
  };

  void start(Worker& worker);
  // Ends every request of `worker` with `fault` and stops the process.
  void fail_worker(Worker& worker, EnvFault fault, const std::string& error, std::vector<EnvReply>& out);

  std::string command_;
  double timeout_seconds_;
  std::vector<Worker> workers_;
  std::map<int64_t, Assignment> episode_worker_;
  std::vector<EnvReply> undeliverable_;  // crashes found at send time, delivered by poll
  int64_t failed_starts_ = 0;            // workers in a row that died before answering
  double mean_answer_seconds_ = 0;       // moving average over answers
  int64_t answered_ = 0;
};

}  // namespace ferry::rl
