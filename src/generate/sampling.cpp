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

double draw_uniform(at::Generator& generator) {
  return at::empty({1}, at::TensorOptions().dtype(at::kDouble)).uniform_(0.0, 1.0, generator).item<double>();
}

at::Tensor sample_by_inverse_cdf(const at::Tensor& probs, const at::Tensor& uniforms) {
  FERRY_CHECK(probs.dim() == 2 && uniforms.dim() == 1 && uniforms.size(0) == probs.size(0),
              "sample_by_inverse_cdf: probs must be (B, V) and uniforms (B)");
  const at::Tensor cdf = at::cumsum(probs, -1, at::kDouble);        // (B, V), nondecreasing
  const at::Tensor total = cdf.narrow(-1, probs.size(-1) - 1, 1).contiguous();  // (B, 1)
  if (!(total > 0).all().item<bool>()) {
    throw UserError("sampling: the model's next-token probabilities are not finite (its logits hold NaN or "
                    "infinity): the weights have diverged or overflowed; lower the learning rate, or load the "
                    "model in fp32 or bf16 instead of fp16");
  }
  const at::Tensor target = uniforms.to(cdf.device(), at::kDouble).unsqueeze(1) * total;  // (B, 1), < total
  // The first token whose cumulative probability passes the target (so it has probability > 0). The
  // target is below the total (u < 1), so this is at most the last token of probability > 0, where
  // the cumulative reaches the total; the minimum guards that against rounding in a device's scan.
  const at::Tensor chosen = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true);
  const at::Tensor last = at::searchsorted(cdf, total, /*out_int32=*/false, /*right=*/false);
  return at::minimum(chosen, last).squeeze(1);
}

at::Tensor choose_next_tokens(const at::Tensor& logits, const SamplingOptions& options, at::Generator& generator) {
  if (options.greedy) return logits.argmax(-1);
  check_sampling_options(options);
  const at::Tensor uniforms =
      at::empty({logits.size(0)}, at::TensorOptions().dtype(at::kDouble)).uniform_(0.0, 1.0, generator);
  return sample_by_inverse_cdf(warp_logits(logits, options).softmax(-1), uniforms);
}

at::Tensor choose_next_tokens(const at::Tensor& logits, const SamplingOptions& options,
                              std::vector<at::Generator>& row_generators) {
  if (options.greedy) return logits.argmax(-1);
  check_sampling_options(options);
  FERRY_CHECK(static_cast<int64_t>(row_generators.size()) == logits.size(0), "choose_next_tokens: ",
              row_generators.size(), " generators for ", logits.size(0), " rows");
  std::vector<double> uniforms;
  for (at::Generator& generator : row_generators) uniforms.push_back(draw_uniform(generator));
  return sample_by_inverse_cdf(warp_logits(logits, options).softmax(-1), at::tensor(uniforms, at::kDouble));
}

at::Generator make_sampling_generator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

uint64_t mix_seed(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

at::Generator row_sampling_generator(uint64_t seed, int64_t row) {
  return make_sampling_generator(mix_seed(seed ^ (static_cast<uint64_t>(row) + 1) * 0xD6E8FEB86659FD93ULL));
}

}  // namespace ferry
