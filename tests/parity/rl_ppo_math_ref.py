#!/usr/bin/env python3
"""Reference for Ferry's PPO math (KL estimators, rewards, GAE, whitening, clipped losses, entropy, KL control,
running moments), float64 on the CPU.

Usage: rl_ppo_math_ref.py OUTDIR. Writes OUTDIR/inputs.safetensors and OUTDIR/expected.safetensors. Every tensor is
float64 and contiguous unless marked int64; every scalar has shape (1).

TRL 1.16 (the venv's) no longer has a PPOTrainer, nor masked_mean / masked_var / masked_whiten / RunningMoments /
AdaptiveKLController. Where it still has the helper (entropy_from_logits, selective_log_softmax in
trl/trainer/utils.py) that function is called; everything else is written out in NumPy float64, line for line as
TRL 0.24.0 does it (trl/core.py, trl/trainer/ppo_trainer.py PPOTrainer.train, trl/trainer/utils.py), or, for the KL
controller, which TRL had already dropped by 0.24, as TRL 0.11.4's trl/trainer/utils.py AdaptiveKLController.

Constants: B = 5 rows, T = 8 response positions, V = 11 vocabulary, gamma 0.99, lam 0.95, kl_coef 0.1,
clip_eps 0.2 (TRL's cliprange), value_clip_eps 0.2 (TRL's cliprange_value), temperature 0.7.

inputs.safetensors
  lengths (B) int64 = [8, 3, 1, 6, 8]: response lengths (a row with length 8 has no padding).
  mask (B, T) float64: 1.0 where t < lengths[b], else 0.0. Positions with mask 0 are "padding".
  The rest is drawn, in this order, from ONE generator g = torch.Generator().manual_seed(2024) (the same stream as
  torch.manual_seed(2024) on the default CPU generator), every draw with dtype=torch.float64:
    old_logprobs (B, T) = -(randn(B, T).abs() + 0.1)     the rollout policy's log-probs of the sampled tokens
    ref_logprobs (B, T) = -(randn(B, T).abs() + 0.1)     the frozen reference's log-probs
    new_logprobs (B, T) = old_logprobs + 0.3 * randn(B, T)  the policy being optimised
    old_values (B, T)   = randn(B, T)                    the rollout value head
    new_values (B, T)   = old_values + 0.5 * randn(B, T)  the value head being optimised
    scores (B)          = 2 * randn(B)                   the reward model's per-sequence score
    logits (B, T, V)    = 3 * randn(B, T, V)
    token_ids (B, T) int64 = randint(0, V, (B, T))
    moments.batch0 (6)  = 3 + 2 * randn(6)
    moments.batch1 (4)  = -1 + 0.5 * randn(4)
    moments.batch2 (7)  = randn(7)
  Every per-token input holds random values at padding positions too, on purpose: no expected value depends on
  them (except entropy / token_logprobs, which are computed at every position).

expected.safetensors (per-token outputs (B, T) are exactly +0.0 at padding unless marked "all positions")
  kl.k1, kl.k2, kl.k3 (B, T): with logr = ref_logprobs - old_logprobs, k1 = -logr, k2 = 0.5 * logr^2,
      k3 = exp(logr) - 1 - logr (Schulman's estimators; k1 / k3 are ppo_trainer.py's `kl` for kl_estimator
      "k1" / "k3"), each times mask.
  rewards (B, T): -kl_coef * kl.k1 (ppo_trainer.py's non_score_reward, k1) plus scores[b] at t = lengths[b] - 1.
      NOTE: this follows the brief, the score on the LAST response token. TRL 0.24 literally adds the score at
      index sequence_lengths + 1 = lengths[b] (the first padding slot) when lengths[b] < T, else at lengths[b] - 1,
      and keeps values / value-loss positions one slot past the end (padding_mask_p1); this reference does
      neither: one mask, `mask`, is used everywhere.
  advantages_raw, returns (B, T): ppo_trainer.py's GAE loop ("6. compute advantages and returns") run over all T
      positions of the padded batch with values_m = old_values * mask and rewards (0 at padding):
          lastgaelam = 0; for t = T-1 .. 0: nextvalues = values_m[:, t+1] if t < T-1 else 0;
          delta = rewards[:, t] + gamma * nextvalues - values_m[:, t];
          lastgaelam = delta + gamma * lam * lastgaelam; advantages_raw[:, t] = lastgaelam
      returns = advantages_raw + values_m; both are then multiplied by mask. Self-check (asserted, 1e-12): per
      row, the same recursion over only the first lengths[b] positions (bootstrap 0 after the last) gives the
      same values, so zeroed padding yields the per-sequence answer.
  advantages (B, T): trl/core.py masked_whiten(advantages_raw, mask, shift_mean=True) times mask:
      (x - masked_mean(x)) * rsqrt(masked_var(x) + 1e-8), masked_mean(x) = sum(x * mask) / sum(mask),
      masked_var unbiased = masked_mean((x - mean)^2) * n / (n - 1), n = sum(mask) = 26.
  policy.loss (1), policy.clipfrac (1), policy.approxkl (1), policy.per_token (B, T): ppo_trainer.py's policy
      loss with adv = advantages, d = new_logprobs - old_logprobs, ratio = exp(d), pg1 = -adv * ratio,
      pg2 = -adv * clamp(ratio, 1 - clip_eps, 1 + clip_eps); policy.loss = masked_mean(max(pg1, pg2), mask);
      policy.clipfrac = masked_mean((pg2 > pg1) as 0/1, mask); policy.approxkl = 0.5 * masked_mean(d^2, mask)
      (TRL takes a plain .mean() over all B*T slots, whose padding d is 0 because both log-probs are filled with
      INVALID_LOGPROB; this is the masked mean instead); policy.per_token = max(pg1, pg2) * mask.
  value.loss (1), value.clipfrac (1): ppo_trainer.py's value loss with returns above:
      vclipped = clamp(new_values, old_values - value_clip_eps, old_values + value_clip_eps),
      v1 = (new_values - returns)^2, v2 = (vclipped - returns)^2; value.loss = 0.5 * masked_mean(max(v1, v2), mask);
      value.clipfrac = masked_mean((v2 > v1) as 0/1, mask).
  entropy (B, T), all positions: TRL 1.16 trl.trainer.utils.entropy_from_logits(logits) on the UNscaled logits,
      -sum(softmax * log_softmax) per position; asserted equal (1e-12) to TRL 0.24 ppo_trainer.py's
      logsumexp(logits) - sum(softmax(logits) * logits).
  token_logprobs (B, T), all positions: TRL 1.16 trl.trainer.utils.selective_log_softmax(logits / temperature,
      token_ids) = log_softmax(logits / 0.7)[b, t, token_ids[b, t]] (TRL 0.24 divides by temperature + 1e-7; this
      uses 0.7 exactly).
  kl_controller (5): TRL 0.11.4 trl/trainer/utils.py AdaptiveKLController(init_kl_coef=0.1, target=6.0,
      horizon=10000), its value after each update(current, n_steps) of (3.0, 256), (12.0, 256), (6.6, 512),
      (0.0, 256), (5.0, 10000): err = clip(current / target - 1, -0.2, 0.2); value *= 1 + err * n_steps / horizon.
  moments.mean (3), moments.std (3): TRL 0.24 trl/trainer/utils.py RunningMoments (single process), mean / std
      after update(moments.batch0), then batch1, then batch2. Start mean 0, std 1, var 1, count 1e-24;
      update(xs): n = numel, xs_mean, xs_var = mean and BIASED variance of xs; delta = xs_mean - mean;
      tot = count + n; old_sum = var * count + delta^2 * count * n / tot; mean += delta * n / tot;
      var = (old_sum + xs_var * n) / tot; std = sqrt(var * tot / (tot - 1)); count = tot. (TRL casts the batch
      statistics to float32; this keeps float64 throughout.)
"""
import pathlib
import sys

import numpy as np
import torch
from safetensors.torch import save_file

B, T, V = 5, 8, 11
LENGTHS = [8, 3, 1, 6, 8]
GAMMA, LAM = 0.99, 0.95
KL_COEF = 0.1
CLIP_EPS, VALUE_CLIP_EPS = 0.2, 0.2
TEMPERATURE = 0.7
KL_INIT, KL_TARGET, KL_HORIZON = 0.1, 6.0, 10000
KL_UPDATES = [(3.0, 256), (12.0, 256), (6.6, 512), (0.0, 256), (5.0, 10000)]


# ---- TRL 0.24 trl/core.py, in NumPy float64 ----
def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


def masked_var(values, mask, unbiased=True):
    mean = masked_mean(values, mask)
    variance = masked_mean((values - mean) ** 2, mask)
    if unbiased:
        n = mask.sum()
        variance = variance * (n / (n - 1))
    return variance


def masked_whiten(values, mask, shift_mean=True):
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * (1.0 / np.sqrt(var + 1e-8))
    if not shift_mean:
        whitened = whitened + mean
    return whitened


# ---- TRL 0.24 ppo_trainer.py's GAE loop ----
def gae(rewards, values):
    n_t = rewards.shape[1]
    lastgaelam = np.zeros(rewards.shape[0])
    reversed_ = []
    for t in reversed(range(n_t)):
        nextvalues = values[:, t + 1] if t < n_t - 1 else 0.0
        delta = rewards[:, t] + GAMMA * nextvalues - values[:, t]
        lastgaelam = delta + GAMMA * LAM * lastgaelam
        reversed_.append(lastgaelam)
    advantages = np.stack(reversed_[::-1], axis=1)
    return advantages, advantages + values


# ---- TRL 0.11.4 trl/trainer/utils.py AdaptiveKLController ----
class AdaptiveKLController:
    def __init__(self, init_kl_coef, target, horizon):
        self.value, self.target, self.horizon = init_kl_coef, target, horizon

    def update(self, current, n_steps):
        proportional_error = np.clip(current / self.target - 1, -0.2, 0.2)
        self.value *= 1 + proportional_error * n_steps / self.horizon


# ---- TRL 0.24 trl/trainer/utils.py RunningMoments (no accelerator, float64) ----
class RunningMoments:
    def __init__(self):
        self.mean, self.std, self.var, self.count = 0.0, 1.0, 1.0, 1e-24

    def update(self, xs):
        xs_count = xs.size
        xs_mean, xs_var = xs.mean(), xs.var(ddof=0)
        delta = xs_mean - self.mean
        tot_count = self.count + xs_count
        new_sum = xs_var * xs_count
        old_sum = self.var * self.count + delta ** 2 * self.count * xs_count / tot_count
        tot_sum = old_sum + new_sum
        self.mean += delta * xs_count / tot_count
        new_var = tot_sum / tot_count
        self.std = float(np.sqrt(new_var * tot_count / (tot_count - 1)))
        self.var = float(new_var)
        self.count = tot_count


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    # ---- inputs ----
    lengths = torch.tensor(LENGTHS, dtype=torch.int64)
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float64)
    g = torch.Generator().manual_seed(2024)
    f64 = dict(generator=g, dtype=torch.float64)
    old_logprobs = -(torch.randn(B, T, **f64).abs() + 0.1)
    ref_logprobs = -(torch.randn(B, T, **f64).abs() + 0.1)
    new_logprobs = old_logprobs + 0.3 * torch.randn(B, T, **f64)
    old_values = torch.randn(B, T, **f64)
    new_values = old_values + 0.5 * torch.randn(B, T, **f64)
    scores = 2 * torch.randn(B, **f64)
    logits = 3 * torch.randn(B, T, V, **f64)
    token_ids = torch.randint(0, V, (B, T), generator=g, dtype=torch.int64)
    batches = [3 + 2 * torch.randn(6, **f64), -1 + 0.5 * torch.randn(4, **f64), torch.randn(7, **f64)]
    inputs = {"mask": mask, "lengths": lengths, "old_logprobs": old_logprobs, "ref_logprobs": ref_logprobs,
              "new_logprobs": new_logprobs, "old_values": old_values, "new_values": new_values, "scores": scores,
              "logits": logits, "token_ids": token_ids}
    for i, xs in enumerate(batches):
        inputs[f"moments.batch{i}"] = xs

    m = mask.numpy()
    lp_old, lp_ref, lp_new = old_logprobs.numpy(), ref_logprobs.numpy(), new_logprobs.numpy()
    v_old, v_new, sc = old_values.numpy(), new_values.numpy(), scores.numpy()
    expected = {}

    # 1. KL estimators
    logr = lp_ref - lp_old
    k1, k2, k3 = -logr, 0.5 * logr ** 2, (np.exp(logr) - 1) - logr  # k3 as ppo_trainer.py writes it
    expected["kl.k1"], expected["kl.k2"], expected["kl.k3"] = k1 * m, k2 * m, k3 * m

    # 2. rewards
    rewards = -KL_COEF * k1 * m
    for b, n in enumerate(LENGTHS):
        rewards[b, n - 1] += sc[b]
    expected["rewards"] = rewards

    # 3. GAE on the padded batch, then masked
    values_m = v_old * m
    adv_raw, returns = gae(rewards, values_m)
    adv_raw, returns = adv_raw * m, returns * m
    expected["advantages_raw"], expected["returns"] = adv_raw, returns
    for b, n in enumerate(LENGTHS):  # self-check: per sequence, unpadded
        a_seq, r_seq = gae(rewards[b:b + 1, :n], v_old[b:b + 1, :n])
        assert np.abs(a_seq[0] - adv_raw[b, :n]).max() <= 1e-12, b
        assert np.abs(r_seq[0] - returns[b, :n]).max() <= 1e-12, b

    # 4. whitened advantages
    adv = masked_whiten(adv_raw, m, shift_mean=True) * m
    expected["advantages"] = adv

    # 5. clipped policy loss
    d = lp_new - lp_old
    ratio = np.exp(d)
    pg1 = -adv * ratio
    pg2 = -adv * np.clip(ratio, 1.0 - CLIP_EPS, 1.0 + CLIP_EPS)
    pg_max = np.maximum(pg1, pg2)
    expected["policy.loss"] = masked_mean(pg_max, m)
    expected["policy.clipfrac"] = masked_mean((pg2 > pg1).astype(np.float64), m)
    expected["policy.approxkl"] = 0.5 * masked_mean(d ** 2, m)
    expected["policy.per_token"] = pg_max * m

    # 6. clipped value loss
    vclipped = np.clip(v_new, v_old - VALUE_CLIP_EPS, v_old + VALUE_CLIP_EPS)
    v1 = (v_new - returns) ** 2
    v2 = (vclipped - returns) ** 2
    expected["value.loss"] = 0.5 * masked_mean(np.maximum(v1, v2), m)
    expected["value.clipfrac"] = masked_mean((v2 > v1).astype(np.float64), m)

    # 7. entropy and temperature-scaled token log-probs (TRL 1.16's own helpers)
    entropy = entropy_from_logits(logits.clone())
    entropy_024 = torch.logsumexp(logits, dim=-1) - torch.sum(torch.softmax(logits, dim=-1) * logits, dim=-1)
    assert (entropy - entropy_024).abs().max().item() <= 1e-12
    token_logprobs = selective_log_softmax(logits.clone() / TEMPERATURE, token_ids)
    naive = torch.log_softmax(logits / TEMPERATURE, dim=-1).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
    assert (token_logprobs - naive).abs().max().item() <= 1e-12
    expected["entropy"], expected["token_logprobs"] = entropy, token_logprobs

    # 8. adaptive KL controller
    ctl = AdaptiveKLController(KL_INIT, KL_TARGET, KL_HORIZON)
    coefs = []
    for current, n_steps in KL_UPDATES:
        ctl.update(current, n_steps)
        coefs.append(ctl.value)
    expected["kl_controller"] = np.array(coefs)

    # 9. running moments
    rm = RunningMoments()
    means, stds = [], []
    for xs in batches:
        rm.update(xs.numpy())
        means.append(rm.mean)
        stds.append(rm.std)
    expected["moments.mean"], expected["moments.std"] = np.array(means), np.array(stds)

    # ---- write ----
    def as_tensor(x):
        t = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x)
        t = t.to(torch.float64)
        return t.reshape(1) if t.ndim == 0 else t

    expected = {k: as_tensor(v).detach().contiguous().clone() for k, v in expected.items()}
    for k, v in expected.items():
        if v.dim() == 2 and k not in ("entropy", "token_logprobs"):
            # x * mask can leave -0.0 at padding; store +0.0 so padding is 0 bit for bit
            v = torch.where(mask.bool(), v, torch.zeros((), dtype=torch.float64)).contiguous()
            assert v.shape == (B, T) and not bool(torch.signbit(v[mask == 0]).any()), k
            expected[k] = v
    inputs = {k: v.detach().contiguous().clone() for k, v in inputs.items()}
    save_file(inputs, str(out / "inputs.safetensors"))
    save_file(expected, str(out / "expected.safetensors"))
    print("rl_ppo_math: " + ", ".join(
        f"{k} {expected[k].item():.6f}" for k in ("policy.loss", "policy.clipfrac", "policy.approxkl",
                                                  "value.loss", "value.clipfrac")))
    print("  kl_controller " + " ".join(f"{x:.8f}" for x in expected["kl_controller"].tolist())
          + " | moments.mean " + " ".join(f"{x:.6f}" for x in expected["moments.mean"].tolist())
          + " | moments.std " + " ".join(f"{x:.6f}" for x in expected["moments.std"].tolist()))
    print(f"  {len(inputs)} inputs, {len(expected)} expected tensors -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
