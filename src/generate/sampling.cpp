// Logits warpers and next-token choice, transformers' semantics.
#include "src/generate/sampling.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <limits>
#include <vector>

#include "core/error.h"

namespace ferry {

void check_sampling_options(const SamplingOptions& options) {
  if (options.greedy) return;
  if (!(options.temperature > 0.0)) {
    throw UserError(detail::concat("sampling temperature must be > 0, got ", options.temperature,
                                   " (use greedy decoding for a deterministic choice)"));
  }
  if (options.top_k < 0) throw UserError(detail::concat("top_k must be >= 0 (0: off), got ", options.top_k));
  if (!(options.top_p > 0.0 && options.top_p <= 1.0)) {
    throw UserError(detail::concat("top_p must be in (0, 1] (1: off), got ", options.top_p));
  }
}

at::Tensor top_k_filter(const at::Tensor& logits, int64_t k) {
  if (k <= 0 || k >= logits.size(-1)) return logits;
  const at::Tensor kth = std::get<0>(logits.topk(k, -1)).narrow(-1, k - 1, 1);  // (B, 1)
  return logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
}

at::Tensor top_p_filter(const at::Tensor& logits, double p) {
  if (p >= 1.0) return logits;
  auto [sorted, order] = logits.sort(-1, /*descending=*/false);  // (B, V) ascending
  const at::Tensor cumulative = sorted.softmax(-1).cumsum(-1);
  at::Tensor remove_sorted = cumulative <= (1.0 - p);
  remove_sorted.narrow(-1, logits.size(-1) - 1, 1).fill_(false);  // min_tokens_to_keep = 1
  const at::Tensor remove = remove_sorted.scatter(-1, order, remove_sorted);
  return logits.masked_fill(remove, -std::numeric_limits<float>::infinity());
}

at::Tensor warp_logits(const at::Tensor& logits, const SamplingOptions& options) {
  at::Tensor warped = logits.to(at::kFloat);
  if (options.temperature != 1.0) warped = warped / options.temperature;
  warped = top_k_filter(warped, options.top_k);
  return top_p_filter(warped, options.top_p);
}

at::Tensor choose_next_tokens(const at::Tensor& logits, const SamplingOptions& options, at::Generator& generator) {
  if (options.greedy) return logits.argmax(-1);
  check_sampling_options(options);
  const at::Tensor probs = warp_logits(logits, options).softmax(-1).to(at::kCPU);  // (B, V)
  return at::multinomial(probs, 1, /*replacement=*/false, generator).squeeze(-1).to(logits.device());
}

at::Tensor choose_next_tokens(const at::Tensor& logits, const SamplingOptions& options,
                              std::vector<at::Generator>& row_generators) {
  if (options.greedy) return logits.argmax(-1);
  check_sampling_options(options);
  FERRY_CHECK(static_cast<int64_t>(row_generators.size()) == logits.size(0), "choose_next_tokens: ",
              row_generators.size(), " generators for ", logits.size(0), " rows");
  const at::Tensor probs = warp_logits(logits, options).softmax(-1).to(at::kCPU);  // (B, V)
  std::vector<int64_t> next;
  for (int64_t row = 0; row < logits.size(0); ++row) {
    next.push_back(at::multinomial(probs[row], 1, /*replacement=*/false, row_generators[static_cast<size_t>(row)])
                       .item<int64_t>());
  }
  return at::tensor(next, at::kLong).to(logits.device());
}

at::Generator make_sampling_generator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

}  // namespace ferry
