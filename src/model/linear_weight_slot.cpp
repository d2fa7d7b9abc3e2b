// Dropping a Linear's float weight (see linear_weight_slot.h).
#include "src/model/linear_weight_slot.h"

namespace ferry {
namespace {

// Module keeps its parameter dictionary protected; a pointer to the member, formed in a derived
// class, reaches it on any Module.
struct ModuleParameters : torch::nn::Module {
  static torch::OrderedDict<std::string, torch::Tensor>& of(torch::nn::Module& module) {
    return module.*(&ModuleParameters::parameters_);
  }
};

}  // namespace

void drop_linear_weight(torch::nn::LinearImpl& linear) {
  ModuleParameters::of(linear).erase("weight");
  linear.weight = torch::Tensor();
}

}  // namespace ferry
