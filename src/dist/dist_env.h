// DistEnv: this process's place in a data-parallel run, from the environment torchrun sets (and
// `ferry launch` sets the same way): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT. Without WORLD_SIZE (or with WORLD_SIZE=1) the run is a single process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ferry::dist {

struct DistEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;

  bool distributed() const { return world_size > 1; }
};

// Reads the variables through `get` (std::getenv by default). ConfigError naming the variable for
// a value that is not a number, out of range (RANK >= WORLD_SIZE, a port outside 1..65535), or
// missing when WORLD_SIZE > 1 (RANK, MASTER_ADDR and MASTER_PORT are then required).
DistEnv read_dist_env(const std::function<std::optional<std::string>(const char*)>& get = {});

}  // namespace ferry::dist
