// The chunked LM head as a custom autograd Function (see chunked_lm_head.h).
#include "kernels/ops/chunked_lm_head.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"

namespace ferry::kernels {
namespace {

// One chunk's scaled fp32 logits, computed as the unchunked path computes them: soft-capped
// (softcap > 0: cap · tanh(logits / cap), Gemma 2), then divided by the temperature.
at::Tensor chunk_logits(const at::Tensor& hidden, const at::Tensor& weight, double temperature, double softcap) {
  at::Tensor z = at::linear(hidden, weight).to(at::kFloat);
  if (softcap > 0) z.div_(softcap).tanh_().mul_(softcap);
  return temperature == 1.0 ? z : z.div_(temperature);
}

// The cap's derivative at a chunk's scaled logits z (= cap · tanh(·) / T): 1 − tanh², (n, V).
at::Tensor softcap_derivative(const at::Tensor& z, double temperature, double softcap) {
  const at::Tensor t = z * (temperature / softcap);  // tanh(logits / cap)
  return 1.0 - t * t;
}

class ChunkedLmHeadFunction : public torch::autograd::Function<ChunkedLmHeadFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                                                const at::Tensor& weight, const at::Tensor& targets, double temperature,
                                                int64_t chunk, bool with_entropy, double softcap) {
    const int64_t rows = hidden.size(0);
    const at::TensorOptions fp32 = hidden.options().dtype(at::kFloat);
    at::Tensor logprobs = at::empty({rows}, fp32), lse = at::empty({rows}, fp32);
    at::Tensor entropy = with_entropy ? at::empty({rows}, fp32) : at::zeros({rows}, fp32);
    const at::Tensor valid = targets.ge(0);
    const at::Tensor safe = targets.clamp_min(0);
    {
      at::NoGradGuard no_grad;
      for (int64_t start = 0; start < rows; start += chunk) {
        const int64_t n = std::min(chunk, rows - start);
        at::Tensor z = chunk_logits(hidden.narrow(0, start, n), weight, temperature, softcap);  // (n, V)
        const at::Tensor l = z.logsumexp(-1);
        const at::Tensor logp = z.sub_(l.unsqueeze(1));  // log-softmax, in place of the logits
        logprobs.narrow(0, start, n).copy_(logp.gather(1, safe.narrow(0, start, n).unsqueeze(1)).squeeze(1));
        if (with_entropy) entropy.narrow(0, start, n).copy_(logp.exp().mul_(logp).sum(-1).neg_());
        lse.narrow(0, start, n).copy_(l);
      }
      logprobs.masked_fill_(valid.logical_not(), 0.0);
    }
    ctx->save_for_backward({hidden, weight, targets, lse, entropy});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["with_entropy"] = with_entropy;
    ctx->saved_data["softcap"] = softcap;
    ctx->set_materialize_grads(false);
    return {logprobs, entropy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &hidden = saved[0], &weight = saved[1], &targets = saved[2], &lse = saved[3], &entropy = saved[4];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const double softcap = ctx->saved_data["softcap"].toDouble();
    const bool need_hidden = ctx->needs_input_grad(0), need_weight = ctx->needs_input_grad(1);
    const at::Tensor& grad_logprobs = grads[0];
    // The entropy's gradient, when it was computed (otherwise the output is a constant 0).
    const at::Tensor grad_entropy = ctx->saved_data["with_entropy"].toBool() ? grads[1] : at::Tensor();
    if ((!grad_logprobs.defined() && !grad_entropy.defined()) || (!need_hidden && !need_weight)) {
      return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    const int64_t rows = hidden.size(0);
    at::Tensor grad_hidden = need_hidden ? at::empty(hidden.sizes(), hidden.options()) : at::Tensor();
    at::Tensor grad_weight = need_weight ? at::zeros_like(weight) : at::Tensor();
    const at::Tensor safe = targets.clamp_min(0);
    // An ignored row's log-prob is the constant 0: no gradient flows from it.
    const at::Tensor g_logprobs =
        grad_logprobs.defined() ? grad_logprobs.to(at::kFloat).masked_fill(targets.lt(0), 0.0) : at::Tensor();
    for (int64_t start = 0; start < rows; start += chunk) {
      const int64_t n = std::min(chunk, rows - start);
      const at::Tensor h = hidden.narrow(0, start, n);
      at::Tensor g = chunk_logits(h, weight, temperature, softcap);
      const at::Tensor cap_derivative = softcap > 0 ? softcap_derivative(g, temperature, softcap) : at::Tensor();
      g.sub_(lse.narrow(0, start, n).unsqueeze(1));  // log p
      const at::Tensor lp_scale = g_logprobs.defined() ? g_logprobs.narrow(0, start, n).unsqueeze(1) : at::Tensor();
      if (grad_entropy.defined()) {  // −p ⊙ (log p + H) · ∂L/∂H
        const at::Tensor p = g.exp();
        const at::Tensor scale = grad_entropy.narrow(0, start, n).to(at::kFloat).neg().unsqueeze(1);
        g.add_(entropy.narrow(0, start, n).unsqueeze(1)).mul_(p).mul_(scale);
        if (lp_scale.defined()) g.addcmul_(p, lp_scale, -1.0);  // − p · ∂L/∂logprob
      } else {
        g.exp_();  // p, in place: the log-probs' term alone is −p · ∂L/∂logprob
        if (lp_scale.defined()) {
          g.mul_(lp_scale.neg());
        } else {
          g.zero_();
        }
      }
      // + onehot · ∂L/∂logprob
      if (lp_scale.defined()) g.scatter_add_(1, safe.narrow(0, start, n).unsqueeze(1), lp_scale);
      if (temperature != 1.0) g.div_(temperature);  // through z = logits / T
      if (cap_derivative.defined()) g.mul_(cap_derivative);  // through cap · tanh(logits / cap)
      const at::Tensor g_logits = g.to(weight.scalar_type());
      if (need_hidden) {
        at::Tensor rows_grad = grad_hidden.narrow(0, start, n);
        at::mm_out(rows_grad, g_logits, weight);
      }
      if (need_weight) grad_weight.addmm_(g_logits.t(), h);
    }
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The summed NLL with its gradients made in forward (see lm_head_nll_sum).
class ChunkedNllSumFunction : public torch::autograd::Function<ChunkedNllSumFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& targets, int64_t chunk, bool grad_hidden_wanted, bool grad_weight_wanted,
                            double softcap) {
    const int64_t rows = hidden.size(0);
    at::Tensor grad_hidden = grad_hidden_wanted ? at::empty(hidden.sizes(), hidden.options()) : at::Tensor();
    at::Tensor grad_weight = grad_weight_wanted ? at::zeros_like(weight) : at::Tensor();
    const at::Tensor valid = targets.ge(0);
    const at::Tensor safe = targets.clamp_min(0);
    at::Tensor total = at::zeros({}, hidden.options().dtype(at::kFloat));
    for (int64_t start = 0; start < rows; start += chunk) {
      const int64_t n = std::min(chunk, rows - start);
      const at::Tensor h = hidden.narrow(0, start, n);
      const at::Tensor ids = safe.narrow(0, start, n).unsqueeze(1);
      const at::Tensor keep = valid.narrow(0, start, n).unsqueeze(1).to(at::kFloat);  // (n, 1)
      at::Tensor z = chunk_logits(h, weight, 1.0, softcap);
      const at::Tensor lse = z.logsumexp(-1, /*keepdim=*/true);
      total.add_(((lse - z.gather(1, ids)) * keep).sum());
      if (!grad_hidden_wanted && !grad_weight_wanted) continue;
      // ∂/∂z of −log p[target] = p − onehot, for the rows that count.
      const at::Tensor cap_derivative = softcap > 0 ? softcap_derivative(z, 1.0, softcap) : at::Tensor();
      at::Tensor g = z.sub_(lse).exp_().mul_(keep);
      g.scatter_add_(1, ids, keep.neg());
      if (cap_derivative.defined()) g.mul_(cap_derivative);  // through cap · tanh(logits / cap)
      const at::Tensor g_logits = g.to(weight.scalar_type());
      if (grad_hidden_wanted) {
        at::Tensor rows_grad = grad_hidden.narrow(0, start, n);
        at::mm_out(rows_grad, g_logits, weight);
      }
      if (grad_weight_wanted) grad_weight.addmm_(g_logits.t(), h);
    }
    ctx->save_for_backward({grad_hidden, grad_weight});
    return total;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& scale = grads[0];  // ∂L/∂(the sum): a scalar
    auto scaled = [&](const at::Tensor& g) { return g.defined() ? g * scale.to(g.scalar_type()) : at::Tensor(); };
    return {scaled(saved[0]), scaled(saved[1]), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void check_shapes(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets) {
  FERRY_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "LM head: hidden ", hidden.sizes(), " does not match a head weight of ", weight.sizes());
  FERRY_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0), "LM head: ", targets.sizes(),
              " targets for ", hidden.size(0), " rows");
}

}  // namespace

LmHeadTokens chunked_lm_head(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                             double temperature, int64_t chunk, bool with_entropy, double softcap) {
  check_shapes(hidden, weight, targets);
  FERRY_CHECK(chunk >= 1, "LM head: chunk of ", chunk, " rows");
  const auto out = ChunkedLmHeadFunction::apply(hidden, weight, targets.to(hidden.device(), at::kLong), temperature,
                                                chunk, with_entropy, softcap);
  return {out[0], out[1]};
}

LmHeadTokens full_lm_head(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                          double temperature, bool with_entropy, double softcap) {
  check_shapes(hidden, weight, targets);
  const at::Tensor ids = targets.to(hidden.device(), at::kLong);
  const at::Tensor logits = soft_cap(at::linear(hidden, weight).to(at::kFloat), softcap);
  const at::Tensor log_p = at::log_softmax(logits / temperature, -1);  // (N, V)
  const at::Tensor logprobs = log_p.gather(1, ids.clamp_min(0).unsqueeze(1)).squeeze(1).masked_fill(ids.lt(0), 0.0);
  return {logprobs, with_entropy ? -(log_p.exp() * log_p).sum(-1) : at::zeros_like(logprobs)};
}

at::Tensor lm_head_nll_sum(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                           int64_t chunk, double softcap) {
  if (chunk < 0) chunk = auto_logits_chunk(hidden.size(0), weight.size(0), weight.size(1));
  if (chunk == 0) return -full_lm_head(hidden, weight, targets, 1.0, false, softcap).logprobs.sum();
  check_shapes(hidden, weight, targets);
  const bool grads = at::GradMode::is_enabled();
  return ChunkedNllSumFunction::apply(hidden, weight, targets.to(hidden.device(), at::kLong), chunk,
                                      grads && hidden.requires_grad(), grads && weight.requires_grad(), softcap);
}

at::Tensor soft_cap(const at::Tensor& logits, double cap) {
  return cap > 0 ? at::tanh(logits / cap) * cap : logits;
}

LmHeadTokens lm_head_tokens(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                            double temperature, int64_t chunk, bool with_entropy, double softcap) {
  if (chunk < 0) chunk = auto_logits_chunk(hidden.size(0), weight.size(0), weight.size(1));
  if (chunk > 0) return chunked_lm_head(hidden, weight, targets, temperature, chunk, with_entropy, softcap);
  return full_lm_head(hidden, weight, targets, temperature, with_entropy, softcap);
}

}  // namespace ferry::kernels
