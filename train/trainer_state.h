// The loop's part of a checkpoint: how far training got (optimizer steps, data cursor), the loss
// scaler and the random-number generators. With the model folder and the engine's optimizer state
// beside it, a resumed run continues exactly as if it had never stopped.
//
// Files in a checkpoint folder: trainer_state.json (format name + version, so a folder from
// another tool or a future format is rejected with a clear message) and rng_state.safetensors.
#pragma once

#include <cstdint>
#include <filesystem>

#include "src/data/epoch_order.h"
#include "train/loss_scaler.h"

namespace ferry {

struct TrainerState {
  int64_t step = 0;         // optimizer steps completed
  int64_t total_steps = 0;  // of the run that wrote it (the LR schedule's length)
  DataCursor cursor;        // where the next training batch starts
  LossScaler::State loss_scaler;
  int64_t seed = 0;
};

inline constexpr const char* kTrainerStateFile = "trainer_state.json";
inline constexpr const char* kRngStateFile = "rng_state.safetensors";

// Writes trainer_state.json and the global generators' states (CPU, and CUDA when initialised).
void save_trainer_state(const std::filesystem::path& dir, const TrainerState& state);

// Reads trainer_state.json; throws InputError naming the file when it is missing or malformed.
TrainerState load_trainer_state(const std::filesystem::path& dir);

// Puts the generators back to the states saved in `dir` (a missing file is an InputError).
void restore_rng_state(const std::filesystem::path& dir);

}  // namespace ferry
