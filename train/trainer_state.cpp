// trainer_state.json and rng_state.safetensors.
#include "train/trainer_state.h"

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/safetensors.h"

namespace ferry {
namespace {

constexpr const char* kFormat = "ferry-trainer-state";
constexpr int kVersion = 1;

}  // namespace

void save_trainer_state(const std::filesystem::path& dir, const TrainerState& state) {
  const nlohmann::json json{{"format", kFormat},
                            {"version", kVersion},
                            {"step", state.step},
                            {"total_steps", state.total_steps},
                            {"seed", state.seed},
                            {"data", {{"epoch", state.cursor.epoch}, {"position", state.cursor.position}}},
                            {"loss_scaler",
                             {{"scale", state.loss_scaler.scale},
                              {"good_steps", state.loss_scaler.good_steps},
                              {"skipped_steps", state.loss_scaler.skipped_steps}}}};
  const std::filesystem::path file = dir / kTrainerStateFile;
  write_file_atomic(file, json.dump(2) + "\n");

  io::TensorMap rng{{"cpu", at::detail::getDefaultCPUGenerator().get_state()}};
  if (at::globalContext().hasCUDA()) {
    // The current GPU's generator (index -1): this process's (training_device sets it).
    rng["cuda"] = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA)).get_state();
  }
  io::save_safetensors(dir / kRngStateFile, rng);
}

TrainerState load_trainer_state(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / kTrainerStateFile;
  std::ifstream in(file);
  if (!in) {
    throw InputError(file.string() + ": missing; '" + dir.string() +
                     "' is not a Ferry training checkpoint (resume from a step-N folder of output.dir)");
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json json = nlohmann::json::parse(text.str());
    if (json.value("format", "") != kFormat) throw InputError(file.string() + ": not a Ferry trainer state");
    if (json.at("version").get<int>() != kVersion) {
      throw InputError(file.string() + ": trainer state version " + json.at("version").dump() +
                       " is not the one this Ferry reads (" + std::to_string(kVersion) + ")");
    }
    TrainerState state;
    state.step = json.at("step").get<int64_t>();
    state.total_steps = json.at("total_steps").get<int64_t>();
    state.seed = json.at("seed").get<int64_t>();
    state.cursor.epoch = json.at("data").at("epoch").get<int64_t>();
    state.cursor.position = json.at("data").at("position").get<int64_t>();
    const auto& scaler = json.at("loss_scaler");
    state.loss_scaler.scale = scaler.at("scale").get<double>();
    state.loss_scaler.good_steps = scaler.at("good_steps").get<int64_t>();
    state.loss_scaler.skipped_steps = scaler.at("skipped_steps").get<int64_t>();
    if (state.step < 0 || state.cursor.epoch < 0 || state.cursor.position < 0) {
      throw InputError(file.string() + ": negative step or data position");
    }
    return state;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file.string() + ": malformed trainer state (" + e.what() + ")");
  }
}

void restore_rng_state(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / kRngStateFile;
  if (!std::filesystem::exists(file)) throw InputError(file.string() + ": missing; the checkpoint is incomplete");
  const io::TensorMap rng = io::load_safetensors(file);
  auto cpu = rng.find("cpu");
  if (cpu == rng.end()) throw InputError(file.string() + ": holds no 'cpu' generator state");
  at::Generator cpu_generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
  cpu_generator.set_state(cpu->second);
  auto cuda = rng.find("cuda");
  if (cuda != rng.end() && at::globalContext().hasCUDA()) {
    at::Generator cuda_generator = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA));
    cuda_generator.set_state(cuda->second);
  }
}

}  // namespace ferry
