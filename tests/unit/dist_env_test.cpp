// read_dist_env: the torchrun variables, defaults for one process, and errors that name the
// variable and what sets it.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "src/dist/dist_env.h"

namespace ferry::dist {
namespace {

DistEnv read(const std::map<std::string, std::string>& variables) {
  return read_dist_env([&](const char* name) -> std::optional<std::string> {
    auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  });
}

std::string error_of(const std::map<std::string, std::string>& variables) {
  try {
    read(variables);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DistEnv, OneProcessWithoutTheVariables) {
  EXPECT_FALSE(read({}).distributed());
  EXPECT_FALSE(read({{"WORLD_SIZE", "1"}}).distributed());
  EXPECT_EQ(read({}).rank, 0);
}

TEST(DistEnv, ReadsWhatTorchrunSets) {
  const DistEnv env = read({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                            {"MASTER_ADDR", "10.0.0.2"}, {"MASTER_PORT", "29400"}});
  EXPECT_TRUE(env.distributed());
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "10.0.0.2");
  EXPECT_EQ(env.master_port, 29400);
  // Without the LOCAL_* variables: one machine.
  const DistEnv one_machine = read({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_EQ(one_machine.local_rank, 1);
  EXPECT_EQ(one_machine.local_world_size, 2);
}

TEST(DistEnv, BadValuesNameTheVariable) {
  const std::map<std::string, std::string> good{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& name, const std::string& value) {
    auto v = good;
    if (value.empty()) v.erase(name);
    else v[name] = value;
    return error_of(v);
  };
  EXPECT_NE(with("RANK", "2").find("RANK='2'"), std::string::npos) << "rank must be below WORLD_SIZE";
  EXPECT_NE(with("WORLD_SIZE", "two").find("WORLD_SIZE='two'"), std::string::npos);
  EXPECT_NE(with("MASTER_PORT", "70000").find("MASTER_PORT"), std::string::npos);
  const std::string missing = with("MASTER_ADDR", "");
  EXPECT_NE(missing.find("MASTER_ADDR is not set"), std::string::npos) << missing;
  EXPECT_NE(missing.find("ferry launch"), std::string::npos) << missing;
}

}  // namespace
}  // namespace ferry::dist
