// Batched generation with a KV cache: one prefill forward over the left-padded prompts, then one
// token per step for every row, until each row has stopped (EOS or a stop id) or the budget of new
// tokens is spent. Rows that have stopped keep receiving pad tokens (masked out).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "src/generate/sampling.h"
#include "src/model/llama_heads.h"

namespace ferry {

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int64_t> eos_token_ids;   // any of them ends a row (kept in the output)
  std::vector<int64_t> stop_token_ids;  // extra ids that end a row the same way
  int64_t pad_token_id = -1;            // emitted after a row ends; -1: the first EOS id, else 0
  uint64_t seed = 0;                    // seeds sampling when no generator is given
  at::Generator* generator = nullptr;   // CPU generator to draw from (continues across calls)
};

struct GenerateResult {
  at::Tensor tokens;          // (B, T_prompt + T_new) int64: prompts (as given) then new tokens
  at::Tensor attention_mask;  // (B, T_prompt + T_new) int64: 1 at prompt tokens and at new tokens
                              // up to and including the one that stopped the row, 0 elsewhere
  // (B, T_new) fp32: log-probability of each chosen token under the policy distribution
  // softmax(logits / temperature) — before top-k/top-p, which is what PPO's ratio needs; greedy
  // decoding uses temperature 1 (raw logits). 0 after a row has stopped.
  at::Tensor logprobs;
  int64_t prompt_length = 0;  // T_prompt
};

// input_ids, attention_mask: (B, T_prompt), left-padded (prompt_batch.h). T_new is at most
// max_new_tokens, less when every row stopped earlier. Runs without autograd, on the model's
// device; the returned tensors are on that device.
GenerateResult generate(LlamaForCausalLMImpl& model, const at::Tensor& input_ids, const at::Tensor& attention_mask,
                        const GenerateOptions& options);

}  // namespace ferry
