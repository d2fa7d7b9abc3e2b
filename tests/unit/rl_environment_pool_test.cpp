// The environment pool (train/rl/environment_pool.h) against tests/data/scripted_env.py and a few
// shell programs: answers in order per worker and episodes kept on their worker; every fault ends
// only the episodes it concerns (crash: all of that worker's; timeout; garbage; {"error"}), later
// episodes get a fresh worker; a command that never answers is an EnvironmentError naming it and
// its stderr; and no process is left behind.
#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "train/rl/environment_pool.h"

namespace ferry::rl {
namespace {

using Json = nlohmann::ordered_json;

const std::string kScripted = std::string("python3 ") + FERRY_SOURCE_DIR + "/tests/data/scripted_env.py";

// Processes whose parent is this test (zombies included).
int children_of_this_process() {
  int count = 0;
  DIR* proc = opendir("/proc");
  const std::string me = std::to_string(getpid());
  while (dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');
    std::istringstream rest(line.substr(close + 2));
    std::string state, parent;
    rest >> state >> parent;
    if (parent == me) ++count;
  }
  closedir(proc);
  return count;
}

Json reset(Json env) { return Json{{"type", "reset"}, {"prompt", Json{{"env", std::move(env)}}}}; }
Json step(int turn) { return Json{{"type", "step"}, {"turn", turn}, {"message", Json{{"role", "assistant"}, {"content", "x"}}}}; }

// Polls until `count` replies arrived (or 20 s passed).
std::vector<EnvReply> replies(EnvironmentPool& pool, size_t count) {
  std::vector<EnvReply> out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (out.size() < count && std::chrono::steady_clock::now() < until) {
    for (EnvReply& r : pool.poll(200)) out.push_back(std::move(r));
  }
  return out;
}

const EnvReply& of(const std::vector<EnvReply>& rs, int64_t episode) {
  for (const EnvReply& r : rs) {
    if (r.episode == episode) return r;
  }
  static const EnvReply none{-1, EnvFault::none, nullptr, "no reply", 0};
  return none;
}

TEST(EnvironmentPool, AnswersComeBackForTheirEpisodes) {
  {
    EnvironmentPool pool(kScripted, 2, 10);
    for (int e = 0; e < 4; ++e) {
      pool.send(e, reset({{"reset", {{"append", "e" + std::to_string(e)}}}, {"steps", Json::array({{{"reward", e}}})}}));
    }
    std::vector<EnvReply> got = replies(pool, 4);
    ASSERT_EQ(got.size(), 4u);
    for (int e = 0; e < 4; ++e) EXPECT_EQ(of(got, e).body, Json({{"append", "e" + std::to_string(e)}}));
    for (int e = 0; e < 4; ++e) pool.send(e, step(1));
    EXPECT_EQ(pool.in_flight(), 4);
    got = replies(pool, 4);
    for (int e = 0; e < 4; ++e) EXPECT_EQ(of(got, e).body, Json({{"reward", e}})) << "episode " << e;
    EXPECT_EQ(pool.in_flight(), 0);
  }
  EXPECT_EQ(children_of_this_process(), 0);
}

TEST(EnvironmentPool, EachFaultEndsOnlyItsEpisodes) {
  {
    EnvironmentPool pool(kScripted, 4, 3.0);  // one episode per worker; room for a slow start under load
    pool.send(0, reset({{"fault", {{"step1", "crash"}}}}));
    pool.send(1, reset({{"fault", {{"step1", "hang"}}}}));
    pool.send(2, reset({{"fault", {{"step1", "garbage"}}}}));
    pool.send(3, reset({{"fault", {{"step1", "error"}}}}));
    ASSERT_EQ(replies(pool, 4).size(), 4u);
    for (int e = 0; e < 4; ++e) pool.send(e, step(1));
    const std::vector<EnvReply> got = replies(pool, 4);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(of(got, 0).fault, EnvFault::crash);
    EXPECT_NE(of(got, 0).error.find("it exited with status 3"), std::string::npos) << of(got, 0).error;
    EXPECT_EQ(of(got, 1).fault, EnvFault::timeout);
    EXPECT_NE(of(got, 1).error.find("no answer within 3 s (rollout.env_timeout)"), std::string::npos);
    EXPECT_EQ(of(got, 2).fault, EnvFault::malformed);
    EXPECT_NE(of(got, 2).error.find("answered 'this is not json', not a JSON object"), std::string::npos);
    EXPECT_EQ(of(got, 3).fault, EnvFault::malformed);
    EXPECT_NE(of(got, 3).error.find("asked to fail at step1"), std::string::npos);
    // A dead worker's episode cannot go on; a new episode gets a fresh process.
    pool.send(0, step(2));
    EXPECT_EQ(replies(pool, 1).at(0).fault, EnvFault::crash);
    pool.close(0);
    pool.close(1);
    pool.send(10, reset({{"reset", {{"append", "fresh"}}}}));
    pool.send(11, reset({{"reset", {{"append", "fresh"}}}}));
    const std::vector<EnvReply> fresh = replies(pool, 2);
    EXPECT_EQ(of(fresh, 10).fault, EnvFault::none);
    EXPECT_EQ(of(fresh, 11).fault, EnvFault::none);
  }
  EXPECT_EQ(children_of_this_process(), 0);
}

TEST(EnvironmentPool, OneWorkerServesManyEpisodesInOrder) {
  EnvironmentPool pool(kScripted, 1, 10);
  for (int e = 0; e < 20; ++e) pool.send(e, reset({{"reset", {{"append", std::to_string(e)}}}, {"sleep_ms", e % 3}}));
  const std::vector<EnvReply> got = replies(pool, 20);
  ASSERT_EQ(got.size(), 20u);
  for (int e = 0; e < 20; ++e) EXPECT_EQ(got[static_cast<size_t>(e)].body["append"], std::to_string(e));
}

TEST(EnvironmentPool, AnswersForAnotherEpisodeAreMalformed) {
  EnvironmentPool pool("while read line; do echo '{\"episode\": 99}'; done", 1, 10);
  pool.send(0, reset({}));
  const std::vector<EnvReply> got = replies(pool, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].fault, EnvFault::malformed);
  EXPECT_NE(got[0].error.find("answered for episode 99 when episode 0 was next"), std::string::npos) << got[0].error;
}

TEST(EnvironmentPool, APoolThatNeverAnswersIsAnErrorNamingCommandAndStderr) {
  {
    EnvironmentPool pool("echo 'env.py: cannot import gym' >&2; exit 1", 2, 10);
    bool thrown = false;
    try {
      for (int e = 0; e < 10 && !thrown; ++e) {
        pool.send(e, reset({}));
        replies(pool, 1);
      }
    } catch (const EnvironmentError& e) {
      thrown = true;
      const std::string what = e.what();
      EXPECT_NE(what.find("rollout.environment `echo 'env.py: cannot import gym' >&2; exit 1`"), std::string::npos) << what;
      EXPECT_NE(what.find("ended before answering any request"), std::string::npos) << what;
      EXPECT_NE(what.find("it exited with status 1"), std::string::npos) << what;
      EXPECT_NE(what.find("env.py: cannot import gym"), std::string::npos) << what;
    }
    EXPECT_TRUE(thrown);
  }
  EXPECT_EQ(children_of_this_process(), 0);
}

}  // namespace
}  // namespace ferry::rl
