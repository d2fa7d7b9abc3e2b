// Fuzz target: the JSON state files a resume reads — trainer_state.json (step, data cursor, loss
// scaler) and ppo_state.json (KL controller, reward statistics) — as found in a checkpoint folder.
#include <cstdint>
#include <filesystem>

#include "tests/fuzz/fuzz_support.h"
#include "train/rl/rl_run_state.h"
#include "train/trainer_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path dir = ferry_fuzz::scratch_dir();
  ferry_fuzz::write_scratch(ferry::kTrainerStateFile, ferry_fuzz::as_text(data, size));
  ferry_fuzz::write_scratch("ppo_state.json", ferry_fuzz::as_text(data, size));
  ferry_fuzz::expect_clean([&] { (void)ferry::load_trainer_state(dir); });
  ferry_fuzz::expect_clean([&] { (void)ferry::rl::load_rl_run_state(dir); });
  return 0;
}
