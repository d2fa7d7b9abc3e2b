// Choosing the next token from logits: greedy, or sampling after transformers' logits warpers in
// their order — temperature, then top-k, then top-p (each keeps at least one token) — with a
// seeded generator so that runs repeat exactly.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ferry {

struct SamplingOptions {
  bool greedy = true;        // argmax; the other fields are ignored
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // in (0, 1]; 1: off
};

// Throws UserError for a temperature <= 0, top_k < 0 or top_p outside (0, 1] (unless greedy).
void check_sampling_options(const SamplingOptions& options);

// logits: (B, V) -> (B, V) with the tokens outside the k largest set to -inf (ties at the k-th
// value are kept, as transformers does). k <= 0 or k >= V: unchanged.
at::Tensor top_k_filter(const at::Tensor& logits, int64_t k);

// logits: (B, V) -> (B, V) keeping the most likely tokens that together hold probability p, as
// transformers' TopPLogitsWarper: sort ascending, drop tokens while the cumulative probability
// stays <= 1 - p, always keep the most likely one. p >= 1: unchanged.
at::Tensor top_p_filter(const at::Tensor& logits, double p);

// temperature -> top-k -> top-p, on fp32 logits (B, V). The policy log-probabilities PPO needs are
// log_softmax(logits / temperature), before top-k/top-p.
at::Tensor warp_logits(const at::Tensor& logits, const SamplingOptions& options);

// The temperature T of the policy distribution softmax(logits / T) whose log-probabilities RL
// takes (generation's, the rollout's scoring and the learners'): the sampling temperature, or 1
// (raw logits) under greedy decoding. One rule, so the ratio's two sides use the same T.
inline double policy_temperature(bool greedy, double temperature) { return greedy ? 1.0 : temperature; }

// The next token per row: (B, V) logits -> (B) int64 on the logits' device. Sampling takes one
// uniform draw per row from `generator` (a CPU generator), so a seed gives the same tokens on every
// device, and picks by inverse CDF on the logits' device (sample_by_inverse_cdf).
at::Tensor choose_next_tokens(const at::Tensor& logits, const SamplingOptions& options, at::Generator& generator);
// The same with one generator per row: row i draws from row_generators[i] alone, so its token does
// not depend on the other rows of the batch (a data-parallel rollout samples what one process would).
at::Tensor choose_next_tokens(const at::Tensor& logits, const SamplingOptions& options,
                              std::vector<at::Generator>& row_generators);

// The one draw a row's sample takes: a uniform double in [0, 1) from `generator` (CPU).
double draw_uniform(at::Generator& generator);

// Inverse-CDF sampling: for each row of probs (B, V) (>= 0, any scale), the first token whose
// cumulative probability (in fp64) exceeds uniforms[i] x the row's total, (B) int64 on probs'
// device. A token of probability 0 is never chosen. One uniform per row instead of V exponential
// draws (torch.multinomial's method), which made sampling a quarter of a CPU decode step at
// vocabulary 49 152. Throws UserError when a row's total is not a positive finite number (NaN logits).
at::Tensor sample_by_inverse_cdf(const at::Tensor& probs, const at::Tensor& uniforms);

// A CPU generator seeded with `seed`.
at::Generator make_sampling_generator(uint64_t seed);

// splitmix64's finaliser: nearby inputs give unrelated seeds.
uint64_t mix_seed(uint64_t x);

// The generator of row `row` of a stream seeded with `seed` (rows are independent of each other):
// a row samples the same tokens whatever batch it is generated in.
at::Generator row_sampling_generator(uint64_t seed, int64_t row);

}  // namespace ferry
