// Batched generation with a KV cache: one prefill forward over the left-padded prompts (rows with
// the same prompt share one), then one token per step for every row still generating, until each
// row has stopped (EOS, a stop id, or a stop string that its decoded continuation now contains:
// stop_strings.h) or the budget of new tokens is spent. A row that stops leaves the batch with its
// cache rows, so finished rows cost nothing; in the result it reads pad (masked out, log-prob 0).
// With max_rows, at most that many rows decode at once and the others wait: as rows stop, waiting
// rows are prefilled and join the running batch (continuous batching), so the batch stays full
// instead of running its last steps for a few long rows.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/generate/sampling.h"
#include "src/model/model_heads.h"

namespace ferry {

class Tokenizer;

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int64_t> eos_token_ids;   // any of them ends a row (kept in the output)
  std::vector<int64_t> stop_token_ids;  // extra ids that end a row the same way
  // Text that ends a row once its decoded new tokens contain it, however it is split into tokens;
  // the token completing it is the row's last (kept, like EOS). Needs `tokenizer`.
  std::vector<std::string> stop_strings;
  const Tokenizer* tokenizer = nullptr;  // decodes rows for stop_strings
  int64_t pad_token_id = -1;            // emitted after a row ends; -1: the first EOS id, else 0
  uint64_t seed = 0;                    // seeds sampling when no generator is given
  at::Generator* generator = nullptr;   // CPU generator to draw from (continues across calls)
  // One CPU generator per row instead (row i draws from its own): a row's sample then does not
  // depend on the batch it is generated in. Takes precedence over `generator`.
  std::vector<at::Generator>* row_generators = nullptr;
  // On a CUDA model, replay the decode step as a CUDA graph per batch-size bucket
  // (fixed_decode_step.h; generation.cuda_graphs). Ignored on the CPU.
  bool cuda_graphs = true;
  // Rows decoded at once (0: all). Rows past it wait and join as rows stop, in batch order, once a
  // quarter of the places are free (or the rest fit): each joining costs one prefill forward. A
  // row's tokens are the same either way when it samples from its own generator (row_generators)
  // or decodes greedily; with one shared `generator` the draws interleave differently.
  int64_t max_rows = 0;
};

// Command-line generation (`ferry generate`, `ferry eval`) hands generate() this many batches of
// prompts per call, decoded --batch-size rows at a time (max_rows): rows wait and join as others
// stop, and a file of millions of prompts is still never held whole.
inline constexpr int64_t kBatchesPerGenerateCall = 16;

struct GenerateResult {
  at::Tensor tokens;          // (B, T_prompt + T_new) int64: prompts (as given) then new tokens
  at::Tensor attention_mask;  // (B, T_prompt + T_new) int64: 1 at prompt tokens and at new tokens
                              // up to and including the one that stopped the row (EOS, stop id, or
                              // the token completing a stop string), 0 elsewhere
  // (B, T_new) fp32: log-probability of each chosen token under the policy distribution
  // softmax(logits / temperature) — before top-k/top-p, which is what PPO's ratio needs; greedy
  // decoding uses temperature 1 (raw logits). 0 after a row has stopped.
  at::Tensor logprobs;
  int64_t prompt_length = 0;  // T_prompt
};

// input_ids, attention_mask: (B, T_prompt), left-padded (prompt_batch.h). T_new is at most
// max_new_tokens, less when every row stopped earlier; a row's new tokens start at column T_prompt
// whenever it was decoded. Runs without autograd, on the model's
// device; the returned tensors are on that device. Text of a row: completion_of (stop_strings.h).
// Throws UserError for stop_strings without a tokenizer.
GenerateResult generate(CausalLMImpl& model, const at::Tensor& input_ids, const at::Tensor& attention_mask,
                        const GenerateOptions& options);

}  // namespace ferry
