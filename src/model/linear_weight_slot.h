// Swapping a Linear's float weight for a quantised child module (NF4, int8, ggml blocks): the one
// place that reaches into torch::nn::Module's protected parameter dictionary to drop the weight.
#pragma once

#include <torch/nn/modules/linear.h>

namespace ferry {

// Removes `linear`'s float weight (parameter and member), leaving it undefined, so the caller can
// register the quantised child that replaces it.
void drop_linear_weight(torch::nn::LinearImpl& linear);

}  // namespace ferry
