// Writing and reading optimizer_state.safetensors.
#include "offload/optimizer_state_file.h"

#include <torch/torch.h>

#include <utility>

#include "src/core/error.h"
#include "src/io/safetensors.h"

namespace ferry::offload {

void save_optimizer_state(const std::filesystem::path& dir, const std::string& engine,
                          const std::vector<ParameterStateRef>& parameters,
                          const std::map<std::string, int64_t>& steps) {
  io::TensorMap tensors;
  std::map<std::string, std::string> metadata{{"ferry_engine", engine}, {"ferry_engine_version", "1"}};
  for (const auto& [model, count] : steps) metadata["steps." + model] = std::to_string(count);
  for (const ParameterStateRef& p : parameters) {
    const std::string prefix = p.model + "/" + p.parameter + "/";
    tensors[prefix + "exp_avg"] = p.exp_avg;
    tensors[prefix + "exp_avg_sq"] = p.exp_avg_sq;
    if (p.master.defined()) tensors[prefix + "master"] = p.master;
  }
  io::save_safetensors(dir / kOptimizerStateFile, tensors, metadata);
}

void load_optimizer_state(const std::filesystem::path& dir, const std::vector<ParameterStateRef>& parameters,
                          std::map<std::string, int64_t>& steps) {
  const std::filesystem::path file = dir / kOptimizerStateFile;
  if (!std::filesystem::exists(file)) {
    throw InputError(file.string() + ": optimizer state is missing; the checkpoint is incomplete or not Ferry's");
  }
  const io::SafetensorsFile state(file);
  const auto& metadata = state.metadata();
  std::map<std::string, int64_t> found;
  for (const auto& [model, unused] : steps) {
    auto it = metadata.find("steps." + model);
    if (it == metadata.end()) throw InputError(file.string() + ": holds no optimizer state for model '" + model + "'");
    try {
      found[model] = std::stoll(it->second);
    } catch (const std::exception&) {
      throw InputError(file.string() + ": metadata steps." + model + " is not a number");
    }
  }
  std::vector<std::pair<torch::Tensor, std::string>> copies;
  for (const ParameterStateRef& p : parameters) {
    const std::string prefix = p.model + "/" + p.parameter + "/";
    std::vector<std::pair<torch::Tensor, std::string>> wanted{{p.exp_avg, prefix + "exp_avg"},
                                                              {p.exp_avg_sq, prefix + "exp_avg_sq"}};
    if (p.master.defined()) wanted.emplace_back(p.master, prefix + "master");
    for (auto& [target, key] : wanted) {
      if (!state.contains(key)) {
        throw InputError(file.string() + ": missing '" + key +
                         "' (was the checkpoint written for another model or precision?)");
      }
      if (state.info(key).shape != target.sizes().vec() || state.info(key).dtype != at::kFloat) {
        throw InputError(file.string() + ": '" + key + "' has the wrong shape or dtype for this model");
      }
      copies.emplace_back(target, key);
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& [target, key] : copies) target.copy_(state.tensor(key));
  steps = std::move(found);
}

}  // namespace ferry::offload
