// Environment worker processes and their requests (see environment_pool.h).
#include "train/rl/environment_pool.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"
#include "src/metrics/metrics_clock.h"

namespace ferry::rl {
const char* env_fault_name(EnvFault fault) {
  switch (fault) {
    case EnvFault::none: return "none";
    case EnvFault::crash: return "crash";
    case EnvFault::timeout: return "timeout";
    case EnvFault::malformed: return "malformed";
  }
  return "?";
}

EnvironmentPool::EnvironmentPool(std::string command, int64_t workers, double timeout_seconds)
    : command_(std::move(command)), timeout_seconds_(timeout_seconds), workers_(static_cast<size_t>(workers)) {
  FERRY_CHECK(workers >= 1, "EnvironmentPool: workers must be >= 1");
  for (Worker& w : workers_) start(w);
}

EnvironmentPool::~EnvironmentPool() = default;

void EnvironmentPool::start(Worker& worker) {
  try {
    worker.process = std::make_unique<ChildProcess>(command_);
  } catch (const ChildProcessError& e) {
    throw EnvironmentError(std::string("rollout.environment ") + e.what());
  }
  worker.pending.clear();
  worker.answers = 0;
  ++worker.incarnation;
}

void EnvironmentPool::send(int64_t episode, nlohmann::ordered_json request) {
  auto found = episode_worker_.find(episode);
  if (found == episode_worker_.end()) {
    size_t best = 0;
    for (size_t i = 1; i < workers_.size(); ++i) {
      if (workers_[i].open_episodes < workers_[best].open_episodes) best = i;
    }
    Worker& w = workers_[best];
    if (w.process == nullptr || (w.process->broken() && w.pending.empty())) start(w);
    found = episode_worker_.emplace(episode, Assignment{best, w.incarnation}).first;
    ++w.open_episodes;
  }
  Worker& w = workers_[found->second.worker];
  if (w.process == nullptr || w.incarnation != found->second.incarnation) {
    // The process that held this episode's state has died since.
    undeliverable_.push_back({episode, EnvFault::crash, nullptr, "the environment process serving it ended earlier", 0});
    return;
  }
  request["episode"] = episode;
  w.process->write(request.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
  w.pending.push_back({episode, w.pending.empty() ? monotonic_seconds() : 0.0});
}

void EnvironmentPool::close(int64_t episode) {
  const auto found = episode_worker_.find(episode);
  if (found == episode_worker_.end()) return;
  Worker& w = workers_[found->second.worker];
  if (w.incarnation == found->second.incarnation) w.open_episodes = std::max<int64_t>(0, w.open_episodes - 1);
  episode_worker_.erase(found);
}

bool EnvironmentPool::overdue() const {
  if (answered_ == 0) return false;
  const double now = monotonic_seconds();
  for (const Worker& w : workers_) {
    if (!w.pending.empty() && now - w.pending.front().since > std::max(2 * mean_answer_seconds_, 0.05)) return true;
  }
  return false;
}

double EnvironmentPool::drain_seconds() const {
  const double now = monotonic_seconds();
  double longest = 0;
  for (const Worker& w : workers_) {
    if (w.pending.empty()) continue;
    const double head = std::max(mean_answer_seconds_ - (now - w.pending.front().since), 0.0);
    longest = std::max(longest, head + static_cast<double>(w.pending.size() - 1) * mean_answer_seconds_);
  }
  return longest;
}

int64_t EnvironmentPool::in_flight() const {
  int64_t n = static_cast<int64_t>(undeliverable_.size());
  for (const Worker& w : workers_) n += static_cast<int64_t>(w.pending.size());
  return n;
}

void EnvironmentPool::fail_worker(Worker& worker, EnvFault fault, const std::string& error, std::vector<EnvReply>& out) {
  const double now = monotonic_seconds();
  for (const Pending& p : worker.pending) out.push_back({p.episode, fault, nullptr, error, p.since > 0 ? now - p.since : 0});
  worker.pending.clear();
  worker.open_episodes = 0;  // their state is gone: their next requests fault as undeliverable
  const bool never_answered = worker.answers == 0;
  const std::string tail = worker.process->stderr_tail();
  if (fault == EnvFault::timeout) {
    worker.process->kill();
  } else {
    worker.process->stop(0.2);
  }
  if (!never_answered) {
    failed_starts_ = 0;
    return;
  }
  if (++failed_starts_ >= 2 * static_cast<int64_t>(workers_.size())) {
    throw EnvironmentError("rollout.environment `" + command_ + "`: " + std::to_string(failed_starts_) +
                           " environment processes in a row ended before answering any request (the last: " + error +
                           ")" + (tail.empty() ? std::string("; it wrote nothing to stderr")
                                               : "; its stderr ends with:\n" + tail) +
                           "\nrun the command by hand and check that it reads JSON lines on stdin and answers each "
                           "with one JSON object per line (docs/environments.md)");
  }
}

std::vector<EnvReply> EnvironmentPool::poll(int timeout_ms) {
  std::vector<EnvReply> out = std::move(undeliverable_);
  undeliverable_.clear();
  const double give_up = monotonic_seconds() + timeout_ms / 1000.0;
  while (true) {
    const double now = monotonic_seconds();
    for (Worker& w : workers_) {
      if (w.process == nullptr) continue;
      std::string line;
      while (!w.pending.empty() && w.process->pop_line(line)) {
        const Pending p = w.pending.front();
        w.pending.pop_front();
        if (!w.pending.empty()) w.pending.front().since = now;
        ++w.answers;
        failed_starts_ = 0;
        EnvReply reply{p.episode, EnvFault::none, nullptr, "", now - p.since};
        mean_answer_seconds_ = answered_++ == 0 ? reply.seconds : 0.8 * mean_answer_seconds_ + 0.2 * reply.seconds;
        reply.body = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (reply.body.is_discarded() || !reply.body.is_object()) {
          reply.fault = EnvFault::malformed;
          reply.error = "answered '" + shorten(trim(line), 120) + "', not a JSON object";
          reply.body = nullptr;
        } else if (reply.body.contains("error")) {
          reply.fault = EnvFault::malformed;
          reply.error = "answered an error: " + shorten(reply.body["error"].dump(), 120);
        } else if (reply.body.contains("episode") && reply.body["episode"] != nlohmann::ordered_json(p.episode)) {
          reply.fault = EnvFault::malformed;
          reply.error = "answered for episode " + reply.body["episode"].dump() + " when episode " +
                        std::to_string(p.episode) + " was next; answers must come in the order of the requests";
        }
        out.push_back(std::move(reply));
      }
      if (w.pending.empty()) continue;
      if (w.process->broken()) {
        fail_worker(w, EnvFault::crash, w.process->exit_description(), out);
      } else if (now - w.pending.front().since > timeout_seconds_) {
        fail_worker(w, EnvFault::timeout,
                    "no answer within " + detail::concat(timeout_seconds_) + " s (rollout.env_timeout); the process was killed",
                    out);
      }
    }
    if (!out.empty() || now >= give_up) return out;
    double wait = give_up - now;
    std::vector<ChildProcess*> live;
    for (Worker& w : workers_) {
      if (w.process == nullptr || w.pending.empty()) continue;
      live.push_back(w.process.get());
      wait = std::min(wait, w.pending.front().since + timeout_seconds_ - now);
    }
    if (live.empty()) return out;  // nothing to wait for
    ChildProcess::pump(live, static_cast<int>(std::ceil(std::max(wait, 0.0) * 1000)));
  }
}

}  // namespace ferry::rl
