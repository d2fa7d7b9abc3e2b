// The chunked LM head against the plain formula written out here (full logits, autograd through
// log_softmax): values and gradients for hidden states and the head weight within 1e-6 (relative to
// the largest value), for chunk sizes that do and do not divide the rows, ignored labels,
// temperature, unused outputs and frozen weights.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "kernels/ops/chunked_lm_head.h"

namespace ferry {
namespace {

constexpr int64_t kRows = 37, kWidth = 24, kVocab = 53;

// The largest difference relative to the largest value (at least 1): log-probs of ~ -15 have an
// fp32 spacing of ~1e-6 themselves, so 1e-6 relative is a few ulps of fp32.
double max_error(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(1.0, b.to(torch::kDouble).abs().max().item<double>());
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>() / scale;
}

struct Inputs {
  torch::Tensor hidden, weight, targets, logprob_weights, entropy_weights;
};

Inputs make_inputs(torch::ScalarType dtype = torch::kFloat) {
  torch::manual_seed(7);
  Inputs in;
  in.hidden = torch::randn({kRows, kWidth}).to(dtype);
  in.weight = (torch::randn({kVocab, kWidth}) * 0.5).to(dtype);
  in.targets = torch::randint(0, kVocab, {kRows}, torch::kLong);
  in.targets.index_put_({torch::tensor({0, 5, 6, 36})}, -100);  // ignored labels, the last row among them
  in.logprob_weights = torch::randn({kRows});
  in.entropy_weights = torch::randn({kRows});
  return in;
}

struct Result {
  torch::Tensor logprobs, entropy, grad_hidden, grad_weight;
};

// The definition: z = hidden·weightᵀ / T in fp32, log p = log_softmax(z), then
// loss = Σ a·log p[target] (ignored rows give 0) + Σ b·(−Σ p log p).
Result reference(const Inputs& in, double temperature, bool use_logprobs, bool use_entropy) {
  const torch::Tensor hidden = in.hidden.detach().requires_grad_(true);
  const torch::Tensor weight = in.weight.detach().requires_grad_(true);
  const torch::Tensor log_p = torch::log_softmax(torch::matmul(hidden, weight.t()).to(torch::kFloat) / temperature, -1);
  const torch::Tensor ignored = in.targets.lt(0);
  const torch::Tensor logprobs =
      log_p.gather(1, in.targets.clamp_min(0).unsqueeze(1)).squeeze(1).masked_fill(ignored, 0.0);
  const torch::Tensor entropy = -(log_p.exp() * log_p).sum(-1);
  torch::Tensor loss = torch::zeros({}, torch::kFloat);
  if (use_logprobs) loss = loss + (logprobs * in.logprob_weights).sum();
  if (use_entropy) loss = loss + (entropy * in.entropy_weights).sum();
  loss.backward();
  return {logprobs.detach(), entropy.detach(), hidden.grad(), weight.grad()};
}

Result chunked(const Inputs& in, double temperature, int64_t chunk, bool use_logprobs, bool use_entropy,
               bool weight_trainable = true) {
  const torch::Tensor hidden = in.hidden.detach().requires_grad_(true);
  const torch::Tensor weight = in.weight.detach().requires_grad_(weight_trainable);
  const kernels::LmHeadTokens out = kernels::chunked_lm_head(hidden, weight, in.targets, temperature, chunk, true);
  torch::Tensor loss = torch::zeros({}, torch::kFloat);
  if (use_logprobs) loss = loss + (out.logprobs * in.logprob_weights).sum();
  if (use_entropy) loss = loss + (out.entropy * in.entropy_weights).sum();
  loss.backward();
  return {out.logprobs.detach(), out.entropy.detach(), hidden.grad(), weight.grad()};
}

TEST(ChunkedLmHead, EqualsFullLogitsForEveryChunkSize) {
  const Inputs in = make_inputs();
  for (const double temperature : {1.0, 0.7}) {
    const Result want = reference(in, temperature, true, true);
    for (const int64_t chunk : {1, 4, 7, 36, 37, 100}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk) + ", temperature " + std::to_string(temperature));
      const Result got = chunked(in, temperature, chunk, true, true);
      EXPECT_LT(max_error(got.logprobs, want.logprobs), 1e-6);
      EXPECT_LT(max_error(got.entropy, want.entropy), 1e-6);
      EXPECT_LT(max_error(got.grad_hidden, want.grad_hidden), 1e-6);
      EXPECT_LT(max_error(got.grad_weight, want.grad_weight), 1e-6);
      EXPECT_EQ(got.logprobs[5].item<float>(), 0.0f);  // an ignored label
    }
  }
}

TEST(ChunkedLmHead, CrossEntropyIsMinusTheLabelLogProb) {
  const Inputs in = make_inputs();
  const torch::Tensor valid = in.targets.ge(0);
  const torch::Tensor want = torch::nn::functional::cross_entropy(
      torch::matmul(in.hidden, in.weight.t()), in.targets,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(-100));
  const kernels::LmHeadTokens got = kernels::chunked_lm_head(in.hidden, in.weight, in.targets, 1.0, 8, false);
  EXPECT_LT(max_error(-got.logprobs.sum(), want), 1e-6);
  EXPECT_EQ(valid.sum().item<int64_t>(), kRows - 4);
}

TEST(ChunkedLmHead, NllSumGradientsMadeInForwardScaleWithTheUpstreamGradient) {
  const Inputs in = make_inputs();
  const torch::Tensor h0 = in.hidden.detach().requires_grad_(true), w0 = in.weight.detach().requires_grad_(true);
  const torch::Tensor want = torch::nn::functional::cross_entropy(
      torch::matmul(h0, w0.t()), in.targets,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(-100));
  (want * 3.5).backward();
  for (const int64_t chunk : {1, 5, 36, 37, 100, -1, 0}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const torch::Tensor h = in.hidden.detach().requires_grad_(true), w = in.weight.detach().requires_grad_(true);
    const torch::Tensor got = kernels::lm_head_nll_sum(h, w, in.targets, chunk);
    EXPECT_LT(max_error(got, want), 1e-6);
    (got * 3.5).backward();
    EXPECT_LT(max_error(h.grad(), h0.grad()), 1e-6);
    EXPECT_LT(max_error(w.grad(), w0.grad()), 1e-6);
  }
  // A frozen head: only the hidden states' gradient; without grad mode: the value alone.
  const torch::Tensor h = in.hidden.detach().requires_grad_(true);
  kernels::lm_head_nll_sum(h, in.weight, in.targets, 8).mul(3.5).backward();
  EXPECT_LT(max_error(h.grad(), h0.grad()), 1e-6);
  torch::NoGradGuard no_grad;
  EXPECT_LT(max_error(kernels::lm_head_nll_sum(in.hidden, in.weight, in.targets, 8), want), 1e-6);
}

// Gemma 2's final-logit soft-cap: against the definition written out (z = cap · tanh(h·wᵀ / cap) / T,
// autograd through tanh), for the log-probs, the entropy, the summed NLL and all their gradients.
// The cap (2) is small enough that it changes every quantity (checked: capped != uncapped).
TEST(ChunkedLmHead, SoftCappedLogitsFollowTheCappedDefinition) {
  const Inputs in = make_inputs();
  const double cap = 2.0;
  for (const double temperature : {1.0, 0.7}) {
    const torch::Tensor h0 = in.hidden.detach().requires_grad_(true), w0 = in.weight.detach().requires_grad_(true);
    const torch::Tensor raw = torch::matmul(h0, w0.t());
    const torch::Tensor log_p = torch::log_softmax(torch::tanh(raw / cap) * cap / temperature, -1);
    const torch::Tensor ignored = in.targets.lt(0);
    const torch::Tensor logprobs =
        log_p.gather(1, in.targets.clamp_min(0).unsqueeze(1)).squeeze(1).masked_fill(ignored, 0.0);
    const torch::Tensor entropy = -(log_p.exp() * log_p).sum(-1);
    ((logprobs * in.logprob_weights).sum() + (entropy * in.entropy_weights).sum()).backward();
    const Result uncapped = chunked(in, temperature, 7, true, true);
    EXPECT_GT(max_error(uncapped.logprobs, logprobs.detach()), 1e-2);
    for (const int64_t chunk : {1, 7, 100, 0}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk) + ", temperature " + std::to_string(temperature));
      const torch::Tensor h = in.hidden.detach().requires_grad_(true), w = in.weight.detach().requires_grad_(true);
      const kernels::LmHeadTokens out = kernels::lm_head_tokens(h, w, in.targets, temperature, chunk, true, cap);
      ((out.logprobs * in.logprob_weights).sum() + (out.entropy * in.entropy_weights).sum()).backward();
      EXPECT_LT(max_error(out.logprobs, logprobs.detach()), 1e-6);
      EXPECT_LT(max_error(out.entropy, entropy.detach()), 1e-6);
      EXPECT_LT(max_error(h.grad(), h0.grad()), 1e-6);
      EXPECT_LT(max_error(w.grad(), w0.grad()), 1e-6);
    }
  }
  const torch::Tensor h0 = in.hidden.detach().requires_grad_(true), w0 = in.weight.detach().requires_grad_(true);
  const torch::Tensor want = torch::nn::functional::cross_entropy(
      torch::tanh(torch::matmul(h0, w0.t()) / cap) * cap, in.targets,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(-100));
  (want * 3.5).backward();
  for (const int64_t chunk : {1, 5, 100, 0}) {
    SCOPED_TRACE("nll sum, chunk " + std::to_string(chunk));
    const torch::Tensor h = in.hidden.detach().requires_grad_(true), w = in.weight.detach().requires_grad_(true);
    const torch::Tensor got = kernels::lm_head_nll_sum(h, w, in.targets, chunk, cap);
    EXPECT_LT(max_error(got, want), 1e-6);
    (got * 3.5).backward();
    EXPECT_LT(max_error(h.grad(), h0.grad()), 1e-6);
    EXPECT_LT(max_error(w.grad(), w0.grad()), 1e-6);
  }
}

TEST(ChunkedLmHead, OneOutputUnused) {
  const Inputs in = make_inputs();
  for (const bool logprobs_only : {true, false}) {
    const Result want = reference(in, 0.9, logprobs_only, !logprobs_only);
    const Result got = chunked(in, 0.9, 5, logprobs_only, !logprobs_only);
    EXPECT_LT(max_error(got.grad_hidden, want.grad_hidden), 1e-6);
    EXPECT_LT(max_error(got.grad_weight, want.grad_weight), 1e-6);
  }
}

TEST(ChunkedLmHead, WithoutEntropyTheEntropyIsZeroAndLogProbsStillTrain) {
  const Inputs in = make_inputs();
  const Result want = reference(in, 1.0, true, false);
  const torch::Tensor hidden = in.hidden.detach().requires_grad_(true);
  const torch::Tensor weight = in.weight.detach().requires_grad_(true);
  const kernels::LmHeadTokens out = kernels::chunked_lm_head(hidden, weight, in.targets, 1.0, 6, false);
  EXPECT_EQ(out.entropy.abs().sum().item<float>(), 0.0f);
  ((out.logprobs * in.logprob_weights).sum() + out.entropy.sum()).backward();
  EXPECT_LT(max_error(hidden.grad(), want.grad_hidden), 1e-6);
  EXPECT_LT(max_error(weight.grad(), want.grad_weight), 1e-6);
}

TEST(ChunkedLmHead, FrozenWeightGetsNoGradient) {
  const Inputs in = make_inputs();
  const Result want = reference(in, 1.0, true, true);
  const Result got = chunked(in, 1.0, 9, true, true, /*weight_trainable=*/false);
  EXPECT_FALSE(got.grad_weight.defined());
  EXPECT_LT(max_error(got.grad_hidden, want.grad_hidden), 1e-6);
}

TEST(ChunkedLmHead, NoGradModeAndFullPathAgree) {
  const Inputs in = make_inputs();
  const Result want = reference(in, 1.3, true, true);
  torch::NoGradGuard no_grad;
  const kernels::LmHeadTokens got = kernels::lm_head_tokens(in.hidden, in.weight, in.targets, 1.3, 10, true);
  EXPECT_FALSE(got.logprobs.requires_grad());
  EXPECT_LT(max_error(got.logprobs, want.logprobs), 1e-6);
  const kernels::LmHeadTokens full = kernels::lm_head_tokens(in.hidden, in.weight, in.targets, 1.3, 0, true);
  EXPECT_LT(max_error(full.logprobs, want.logprobs), 1e-6);
  EXPECT_LT(max_error(full.entropy, want.entropy), 1e-6);
}

TEST(ChunkedLmHead, Bf16MatchesTheUnchunkedPathToBf16Rounding) {
  const Inputs in = make_inputs(torch::kBFloat16);
  const torch::Tensor h1 = in.hidden.detach().requires_grad_(true), w1 = in.weight.detach().requires_grad_(true);
  const torch::Tensor h2 = in.hidden.detach().requires_grad_(true), w2 = in.weight.detach().requires_grad_(true);
  const kernels::LmHeadTokens full = kernels::full_lm_head(h1, w1, in.targets, 1.0);
  const kernels::LmHeadTokens part = kernels::chunked_lm_head(h2, w2, in.targets, 1.0, 8, true);
  EXPECT_LT(max_error(part.logprobs, full.logprobs), 1e-6);  // the same bf16 logits, widened
  ((full.logprobs * in.logprob_weights).sum() + (full.entropy * in.entropy_weights).sum()).backward();
  ((part.logprobs * in.logprob_weights).sum() + (part.entropy * in.entropy_weights).sum()).backward();
  EXPECT_EQ(h2.grad().scalar_type(), torch::kBFloat16);
  EXPECT_LT(max_error(h2.grad(), h1.grad()), 0.05 * h1.grad().abs().max().item<double>());
  EXPECT_LT(max_error(w2.grad(), w1.grad()), 0.05 * w1.grad().abs().max().item<double>());
}

TEST(ChunkedLmHead, AutoChunkKeepsAChunksLogitsNearTheHiddenStatesSize) {
  EXPECT_EQ(kernels::auto_logits_chunk(4096, 32000, 4096), 512);  // Llama-2-7B: 8 chunks
  EXPECT_EQ(kernels::auto_logits_chunk(4096, 151936, 896), 256);  // Qwen2.5-0.5B: 170 chunks of 25 -> 256
  EXPECT_EQ(kernels::auto_logits_chunk(4096, 32000, 64), kernels::kMinAutoChunk);
  EXPECT_EQ(kernels::auto_logits_chunk(10, 2000, 128), kernels::kMinAutoChunk);
  EXPECT_EQ(kernels::auto_logits_chunk(100000, 1000, 1000), 131072);  // one chunk: every row
}

TEST(ChunkedLmHead, MismatchedShapesAreRejected) {
  const Inputs in = make_inputs();
  EXPECT_THROW(kernels::chunked_lm_head(in.hidden, in.weight.t(), in.targets, 1.0, 4, false), InternalError);
  EXPECT_THROW(kernels::chunked_lm_head(in.hidden, in.weight, in.targets.narrow(0, 0, 3), 1.0, 4, false),
               InternalError);
  EXPECT_THROW(kernels::chunked_lm_head(in.hidden, in.weight, in.targets, 1.0, 0, false), InternalError);
}

}  // namespace
}  // namespace ferry
