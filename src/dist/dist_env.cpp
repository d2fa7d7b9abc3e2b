// Reading the torchrun environment (see dist_env.h).
#include "src/dist/dist_env.h"

#include <charconv>
#include <cstdlib>

#include "core/error.h"

namespace ferry::dist {
namespace {

std::optional<std::string> from_environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int64_t parse_count(const char* name, const std::string& text, int64_t min, int64_t max) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    throw ConfigError(detail::concat("environment variable ", name, "='", text, "': expected a whole number from ",
                                     min, " to ", max, " (set by torchrun or `ferry launch`)"));
  }
  return value;
}

}  // namespace

DistEnv read_dist_env(const std::function<std::optional<std::string>(const char*)>& get_variable) {
  const auto get = get_variable ? get_variable : from_environment;
  DistEnv env;
  const std::optional<std::string> world = get("WORLD_SIZE");
  if (!world) return env;
  env.world_size = parse_count("WORLD_SIZE", *world, 1, 1 << 20);
  if (!env.distributed()) return env;
  const auto required = [&](const char* name) {
    std::optional<std::string> value = get(name);
    if (!value) {
      throw ConfigError(detail::concat("WORLD_SIZE=", env.world_size, " but ", name,
                                       " is not set: start the run with torchrun or `ferry launch --nproc N -- ...`, "
                                       "which set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"));
    }
    return *value;
  };
  env.rank = parse_count("RANK", required("RANK"), 0, env.world_size - 1);
  env.master_addr = required("MASTER_ADDR");
  env.master_port = parse_count("MASTER_PORT", required("MASTER_PORT"), 1, 65535);
  env.local_world_size = env.world_size;
  if (const auto local_world = get("LOCAL_WORLD_SIZE")) {
    env.local_world_size = parse_count("LOCAL_WORLD_SIZE", *local_world, 1, env.world_size);
  }
  env.local_rank = env.rank % env.local_world_size;
  if (const auto local = get("LOCAL_RANK")) env.local_rank = parse_count("LOCAL_RANK", *local, 0, env.local_world_size - 1);
  return env;
}

}  // namespace ferry::dist
