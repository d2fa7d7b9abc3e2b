// RL checkpoint state (see rl_run_state.h).
#include "train/rl/rl_run_state.h"

#include "core/error.h"
#include "core/file_util.h"

namespace fs = std::filesystem;

namespace ferry::rl {
namespace {

constexpr const char* kPpoStateFile = "ppo_state.json";
constexpr const char* kPpoStateFormat = "ferry-ppo-state";

}  // namespace

void save_rl_run_state(const fs::path& dir, const RlRunState& state) {
  const nlohmann::json j{{"format", kPpoStateFormat},
                         {"version", 1},
                         {"kl_coef", state.kl_coef},
                         {"reward_moments", {{"mean", state.moments.mean}, {"std", state.moments.std},
                                             {"var", state.moments.var}, {"count", state.moments.count}}},
                         {"ptx_cursor", {{"epoch", state.ptx_cursor.epoch}, {"position", state.ptx_cursor.position}}},
                         {"optimizer_steps", state.optimizer_steps},
                         {"first_eval", state.first_eval}};
  write_file_atomic(dir / kPpoStateFile, j.dump(2) + "\n");
}

RlRunState load_rl_run_state(const fs::path& dir) {
  const fs::path path = dir / kPpoStateFile;
  if (!fs::exists(path)) {
    throw InputError(path.string() + " is missing: " + dir.string() + " is not a PPO checkpoint; resume from one "
                     "written by `ferry train-ppo`");
  }
  const std::string text = read_file(path);
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("format", "") != kPpoStateFormat || j.value("version", 0) != 1) {
      throw InputError(path.string() + ": not a Ferry PPO state (format " + std::string(kPpoStateFormat) +
                       ", version 1)");
    }
    RlRunState state;
    state.kl_coef = j.at("kl_coef").get<double>();
    const auto& m = j.at("reward_moments");
    state.moments = {m.at("mean").get<double>(), m.at("std").get<double>(), m.at("var").get<double>(),
                     m.at("count").get<double>()};
    state.ptx_cursor = {j.at("ptx_cursor").at("epoch").get<int64_t>(), j.at("ptx_cursor").at("position").get<int64_t>()};
    state.optimizer_steps = j.at("optimizer_steps").get<int64_t>();
    state.first_eval = j.at("first_eval");
    return state;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path.string() + ": malformed PPO state (" + e.what() + "); resume from another checkpoint");
  }
}

}  // namespace ferry::rl
