// A Linear projection with an optional LoRA adapter (see lora_linear.h).
#include "src/model/lora_linear.h"

#include "kernels/ops/small_batch_linear.h"
#include "src/model/ggml_linear.h"
#include "src/model/int8_linear.h"
#include "src/model/nf4_linear.h"

namespace ferry {

torch::Tensor lora_project(const torch::nn::Linear& base, const LoraAdapter& adapter, const torch::Tensor& x,
                           bool training) {
  torch::Tensor y;
  if (const Nf4WeightImpl* nf4 = nf4_weight_of(*base)) {  // QLoRA's 4-bit base (nf4_linear.h)
    y = nf4_linear(x, *nf4);
    if (base->bias.defined()) y = y + base->bias;
  } else if (const Int8WeightImpl* int8 = int8_weight_of(*base)) {  // an int8 base (int8_linear.h)
    y = int8_linear(x, *int8);
    if (base->bias.defined()) y = y + base->bias;
  } else if (const GgmlWeightImpl* ggml = ggml_weight_of(*base)) {  // a GGUF model's base (ggml_linear.h)
    y = ggml_linear(x, *ggml);
    if (base->bias.defined()) y = y + base->bias;
  } else {
    y = kernels::small_batch_linear(x, base->weight, base->bias);  // at::linear but for a decode step's few rows
  }
  if (!adapter.attached() || !adapter.enabled) return y;
  const torch::Tensor input = adapter.dropout > 0 ? torch::dropout(x, adapter.dropout, training) : x;
  return y + adapter.lora_B.ptr()->forward(adapter.lora_A.ptr()->forward(input)) * adapter.scaling;  // (..., rank) inside
}

}  // namespace ferry
