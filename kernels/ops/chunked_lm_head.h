// Chunked LM head: the per-token log-probs of given ids (and the entropy) under
// logits = hidden · weightᵀ / temperature, computed `chunk` rows at a time, so that no more than
// one chunk's logits (chunk × vocab, fp32) ever exists — in forward and in backward, which
// recomputes each chunk's logits from the saved hidden states instead of keeping them (Liger's and
// Unsloth's fused linear + cross-entropy, generalised to the per-token log-probs and entropy that
// DPO, PPO and GRPO need). Cross-entropy is minus the log-prob of the label.
//
// Per row, with z = logits / temperature (fp32), lse = logsumexp(z), log p = z − lse:
//   logprob = log p[target]                       entropy = −Σ p · log p = lse − Σ p · z
//   ∂logprob/∂z = onehot(target) − p              ∂entropy/∂z = −p ⊙ (log p + entropy)
// Logits are computed in the weight's dtype and widened to fp32, as the unchunked path does. With
// softcap > 0 (Gemma 2's final_logit_softcapping) the logits are cap · tanh(logits / cap) before
// the temperature, and their gradient goes through the cap (× 1 − tanh²).
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/ops/logits_chunk.h"

namespace ferry::kernels {

struct LmHeadTokens {
  at::Tensor logprobs;  // (N) fp32; 0 where the target is negative (an ignored label)
  at::Tensor entropy;   // (N) fp32, every row; zeros when not asked for
};

// hidden: (N, C) in the weight's dtype; weight: (V, C) the LM head (or the tied embedding);
// targets: (N) int64, negative = ignored. chunk ≥ 1 rows per piece (any N; the last piece may be
// shorter). with_entropy: compute the entropy (else it is zeros, and costs nothing).
// Differentiable in hidden and weight (through both outputs); the weight's gradient is
// accumulated chunk by chunk in its own dtype.
LmHeadTokens chunked_lm_head(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                             double temperature, int64_t chunk, bool with_entropy, double softcap = 0.0);

// Σ −log p[target] over the rows whose target is not negative (the causal-LM loss, a scalar),
// chunk rows at a time. A scalar loss lets the gradients be computed in forward, as Liger's fused
// linear + cross-entropy does — the upstream gradient taken as 1, scaled in backward — so
// backward recomputes no logits: the GEMMs of the unchunked loss, the memory of one chunk's logits
// (plus the hidden states' and the weight's gradients, made in forward). Gradients are made only
// when grad mode is on and hidden or weight requires them. chunk: as lm_head_tokens (0: the
// unchunked formula; −1: auto).
at::Tensor lm_head_nll_sum(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                           int64_t chunk, double softcap = 0.0);

// The unchunked formula (full logits, autograd through log_softmax): the reference the chunked op
// is tested against and the path `train.logits_chunk: 0` takes.
LmHeadTokens full_lm_head(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                          double temperature, bool with_entropy = true, double softcap = 0.0);

// cap · tanh(logits / cap) when cap > 0 (Gemma 2's final_logit_softcapping), else `logits`: what
// every path from hidden states to logits applies (the heads below, generation, distillation).
at::Tensor soft_cap(const at::Tensor& logits, double cap);

// chunked_lm_head when chunk > 0 (or −1: auto_logits_chunk), full_lm_head when chunk is 0
// (train.logits_chunk).
LmHeadTokens lm_head_tokens(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                            double temperature, int64_t chunk, bool with_entropy, double softcap = 0.0);

}  // namespace ferry::kernels
