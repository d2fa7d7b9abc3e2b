#!/usr/bin/env python3
"""Reference for Ferry's GRPO loss, group advantages and critic-free (RLOO / REINFORCE-baseline) estimators, float32.

Usage: rl_grpo_loss_ref.py OUTDIR. Writes OUTDIR/inputs.safetensors and OUTDIR/expected.safetensors. Every tensor is
float32 and contiguous unless marked int64; every scalar has shape (1). Runs in a few seconds on the CPU.

Section 1 CALLS the real TRL 1.16 code: trl.GRPOTrainer._compute_loss(stub, None, inputs) (grpo_trainer.py) on a stub
`self` (a types.SimpleNamespace, see make_stub), so the loss and its autograd gradient come from TRL itself, not from a
re-implementation. Section 2 copies TRL's advantage lines (they sit inside _generate_and_score_completions, which
needs a model, tokenizer and reward functions, so they are copied, not called) and CALLS trl.trainer.utils.nanstd.
Section 3 has no TRL counterpart (TRL has no RLOO / REINFORCE++-baseline trainer); it is written out in NumPy float64
(OpenRLHF style) and stored as float32.

Constants: B = 6 rows, T = 7 completion positions, num_generations 3 (groups = rows 0-2 and 3-5), epsilon (low) 0.2,
max_completion_length 8 (deliberately > T), current_gradient_accumulation_steps 2, steps_per_generation 4,
num_items_in_batch 50, num_processes 1, reward_weights [1.0, 0.5], gamma 1.0, kl_coef 0.1.

inputs.safetensors
  lengths (B) int64 = [7, 3, 0, 5, 7, 2]: completion lengths. Row 2 is EMPTY (fully masked) on purpose.
  mask (B, T): 1.0 where t < lengths[b], else 0.0 (sum 24). Positions with mask 0 are "padding"; every per-token input
      holds random values there, on purpose. (TRL's completion_mask is an integer tensor; _compute_loss is given
      this mask as int64, and mask.sum(...).clamp(min=1.0) promotes it to float32.)
  The rest is drawn, in this order, from ONE generator g = torch.Generator().manual_seed(2025), every draw with
  dtype=torch.float32:
    old_logps (B, T)        = -(randn(B, T).abs() + 0.1)          rollout ("old") policy log-probs
    new_logps (B, T)        = old_logps + 0.6 * randn(B, T)       the policy being optimised
    ref_logps (B, T)        = -(randn(B, T).abs() + 0.1)          frozen reference log-probs
    advantages (B)          = randn(B)                            per-sequence advantages fed to the loss
    rewards_per_func (B, 2) = randn(B, 2), then rewards_per_func[4, 1] = NaN (reward function 1 returned None)
    scores (B)              = 2 * randn(B)                        per-sequence scores for section 3
    kl (B, T)               = randn(B, T).abs() * 0.1             per-token KL estimate for section 3
  group_rewards (B) = [1.0, 0.0, 1.0, 0.5, 0.5, 0.5] (not drawn; the second group has zero std).

expected.safetensors

1. GRPO loss: 102 cases. For loss_type in [grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo] x
   importance_sampling_level in [token, sequence]
   x epsilon_high in [None, 0.28] x beta in [0, 0.04] with use_bias_correction_kl = True, plus, for beta 0.04 only,
   the same with use_bias_correction_kl = False. Case name: <loss_type>.<level>.eh<0.2|0.28>.beta<0|0.04>[.nobias]
   (epsilon_high None is written eh0.2: GRPOTrainer.__init__ sets epsilon_high = args.epsilon when it is None),
   e.g. grpo.token.eh0.2.beta0, dapo.sequence.eh0.28.beta0.04.nobias.
     loss.<case> (1): the loss _compute_loss returns (train mode, so already divided for gradient accumulation).
     grad.<case> (B, T): d loss / d new_logps from loss.backward(), where _get_per_token_logps_and_entropies returns
         the leaf new_logps.clone().requires_grad_(True). Exactly 0 at padding and in row 2 (asserted), stored +0.0.
   Stub: top_entropy_quantile 1.0 (no entropy mask), off_policy_mask_threshold None, use_vllm False,
   aux_loss_enabled False, args.delta None, _entropy_bonus_enabled False (entropy_coef 0), model.training True,
   accelerator with num_processes 1 and identity gather / reduce; _metrics = {"train"/"eval": defaultdict(list)} (the
   metric-logging tail of _compute_loss runs and is asserted to have logged). TRL's inputs: prompt_ids (B, 2) zeros,
   prompt_mask (B, 2) ones, completion_ids (B, T) zeros, completion_mask = mask (int64), advantages,
   old_per_token_logps = old_logps, ref_per_token_logps = ref_logps (only when beta != 0),
   num_items_in_batch = tensor(50.0). The entropies the stub returns, 0.5 + 0.01 * arange(B*T).view(B, T), only
   feed the metrics and are not stored.
   The formula, written out by hand in this script (hand_loss) and asserted equal to TRL's loss AND gradient to 1e-6
   for all 102 cases; with A[b] = advantages[b], m = mask, n_b = sum_t m[b, t], eps_high = 0.2 or 0.28:
     log_r = new_logps - old_logps
     token level:    r[b, t] = exp(log_r[b, t])
     sequence level: r[b]    = exp(sum_t(log_r[b, t] * m[b, t]) / max(n_b, 1))   (GSPO; one ratio per row, broadcast
                     over t; row 2 gets r = exp(0) = 1)
     L = -min(r * A, clamp(r, 1 - 0.2, 1 + eps_high) * A)          (grpo, bnpo, dr_grpo, dapo, luspo)
     cispo: L = -sg(min(r, eps_high)) * A * new   (sg: no gradient; the weight itself is capped at eps_high;
            cispo also runs with epsilon_high 5.0, ScaleRL's value, where no ratio is capped: case eh5)
     sapo:  L = -sigmoid(tau * (r - 1)) * 4 / tau * A, tau = 0.9 where A > 0 else 1.2 (sapo_temperature_pos / _neg)
     vespo: L = -sg(phi) * A * new, phi = exp(lam + k * log_w - lam * exp(log_w)) per row, where
            log_w = clamp(sum_t clamp(log_r, -20, 20) * m, log 1e-8, 20) (a SUM, at either level) and k, lam =
            2.5, 3.5 where A >= 0 else 2.0, 1.5 (vespo_k_pos, vespo_lambda_pos, vespo_k_neg, vespo_lambda_neg; not
            TRL's defaults, so a value not passed through shows); the stub's get_gamma_weights is TRL's own
     if beta != 0: k3 = exp(ref - new) - (ref - new) - 1 (per token; new = new_logps, differentiated);
                   if use_bias_correction_kl: k3 = k3 * r (the SAME r as above: at sequence level the row's sequence
                   ratio, not the per-token one, and not detached, so the KL gradient also flows through r into every
                   token of the row); L = L + beta * k3
     S = sum_{b,t} L[b, t] * m[b, t]   (at sequence level with beta 0, L is one value per row and counts n_b times)
     grpo, sapo: loss = (1/B) * sum_b (sum_t L[b, t] m[b, t] / max(n_b, 1)) / 2   (row 2 adds 0 but counts in B = 6)
     luspo:   loss = (1/B) * sum_b sum_t L[b, t] m[b, t] / 2
     bnpo:    loss = S / max(sum m, 1) / 2                               = S / (24 * 2) = S / 48
     dr_grpo: loss = S / (B * max_completion_length) / 2                 = S / (6 * 8 * 2) = S / 96
     dapo, cispo, vespo: loss = S / (num_items_in_batch / num_processes * current_gradient_accumulation_steps
                          / steps_per_generation)                        = S / (50 / 1 * 2 / 4) = S / 25
   (the trailing / 2 is current_gradient_accumulation_steps; dapo instead rescales num_items_in_batch, which spans the
   whole generation batch, to one accumulation window.)
   With these inputs, at sequence level no row's ratio leaves [0.8, 1.2] on the side that clips for its advantage's
   sign (only row 1 leaves the band, r = 1.27, and its A < 0), so the eh0.2 and eh0.28 sequence cases are identical
   and the sequence cases exercise no clipping. The token cases clip on both sides (high: row 0, t = 5 and 6 at eh0.2
   but only t = 5 at eh0.28; low: row 3 t = 1, row 4 t = 2 and 3), so eh0.2 != eh0.28 there.
   Not asserted but worth knowing: the metric tail's masked_seq_mean divides by the UNclamped n_b, so at token level
   row 2's clip fractions are NaN; TRL's nanmin / nanmax skip them, and the loss itself is unaffected.

2. Group advantages: TRL 1.16 grpo_trainer.py _generate_and_score_completions, multi_objective_aggregation
   "sum_then_normalize", copied line for line (trl_group_advantages), with trl.trainer.utils.nanstd (unbiased, NaN
   ignored). For rewards_per_func R (B, K) and weights w (K):
     rewards = nansum_k(R * w); rows where EVERY function is NaN -> NaN
     mean = nanmean over each group of 3, repeated per row
     std  = nanstd over each group of 3 ("group", "none"), or nanstd over all B rows ("batch")
     adv  = rewards - mean; adv = adv / (std + 1e-4) unless "none"; adv = nan_to_num(adv, nan=0)
   adv.group, adv.batch, adv.none (B): with R = group_rewards.unsqueeze(1), w = [1.0]. The zero-std group (rows 3-5)
       gives exactly 0 (0 / (0 + 1e-4)), not NaN (asserted).
   rewards.mixed (B): nansum_k(rewards_per_func * [1.0, 0.5]); row 4 = rewards_per_func[4, 0] (the NaN term is
       dropped, weights are NOT renormalised; row 4 is not "unscorable" because function 0 scored it).
   adv.mixed.group (B): the "group" advantage of rewards.mixed (R = rewards_per_func, w = [1.0, 0.5]).
   Cross-checked in NumPy float64 (std with ddof=1) to 1e-5.

3. Critic-free estimators (OpenRLHF style, NumPy float64, stored float32), groups of 3 consecutive rows:
   rloo.scores (B): scores[i] - (sum_group - scores[i]) / (3 - 1)      (leave-one-out baseline)
   reinforce_baseline.scores (B): scores[i] - mean_group
   For est in [rloo, reinforce_baseline]:
     token rewards R[b, t] = (-kl_coef * kl[b, t] + (est.scores[b] if t == lengths[b] - 1 else 0)) * mask[b, t]
         (row 2, length 0, gets no score and no KL penalty)
     <est>.returns (B, T): G[b, t] = R[b, t] + gamma * G[b, t + 1] (G[b, T] = 0), the reverse recursion over all T
         positions, then times mask; gamma = 1, so G is the suffix sum (asserted against explicit suffix sums, 1e-12).
     <est>.advantages (B, T): masked whitening of G: n = sum(mask) = 24, mean = sum(G * mask) / n,
         var = sum((G - mean)^2 * mask) / n * n / (n - 1), advantages = (G - mean) * rsqrt(var + 1e-8) * mask.
Every (B, T) expected tensor is +0.0 (not -0.0) at padding and in row 2; every expected value is finite (asserted).
"""
import collections
import math
import pathlib
import sys
import types

import numpy as np
import torch
from safetensors.torch import save_file

B, T = 6, 7
LENGTHS = [7, 3, 0, 5, 7, 2]
SEED = 2025
NUM_GENERATIONS = 3
REWARD_WEIGHTS = [1.0, 0.5]
GROUP_REWARDS = [1.0, 0.0, 1.0, 0.5, 0.5, 0.5]
# _compute_loss stub settings
EPSILON = 0.2
MAX_COMPLETION_LENGTH = 8
GRAD_ACCUM = 2
STEPS_PER_GENERATION = 4
NUM_ITEMS_IN_BATCH = 50.0
NUM_PROCESSES = 1
LOSS_TYPES = ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"]
# sapo's gate temperatures and vespo's Gamma weights: not TRL's defaults, so that a value that is
# not passed through shows.
SAPO_TEMPERATURE_POS, SAPO_TEMPERATURE_NEG = 0.9, 1.2
VESPO_K_POS, VESPO_LAMBDA_POS, VESPO_K_NEG, VESPO_LAMBDA_NEG = 2.5, 3.5, 2.0, 1.5
LEVELS = ["token", "sequence"]
EPSILON_HIGHS = [None, 0.28]
BETAS = [0.0, 0.04]
# critic-free estimators
GAMMA = 1.0
KL_COEF = 0.1


def fmt(x):
    return f"{x:g}"


def case_name(loss_type, level, eh, beta, bias):
    return (f"{loss_type}.{level}.eh{fmt(EPSILON if eh is None else eh)}.beta{fmt(beta)}"
            + ("" if bias else ".nobias"))


def all_cases():
    cases = []
    for loss_type in LOSS_TYPES:
        for level in LEVELS:
            # cispo caps the weight itself at epsilon_high: 5 (ScaleRL's value) leaves ratios uncapped
            for eh in EPSILON_HIGHS + ([5.0] if loss_type == "cispo" else []):
                for beta in BETAS:
                    cases.append((loss_type, level, eh, beta, True))
                    if beta != 0.0:
                        cases.append((loss_type, level, eh, beta, False))
    return cases


# ---- 1. the real trl.GRPOTrainer._compute_loss on a stub `self` ----
class _Accelerator:
    num_processes = NUM_PROCESSES
    process_index = 0
    sync_gradients = True

    @staticmethod
    def gather(x):
        return x

    @staticmethod
    def gather_for_metrics(x):
        return x

    @staticmethod
    def reduce(x, reduction="sum"):
        return x


def make_stub(new_logps_leaf, entropies, loss_type, level, eh, beta, bias):
    """Every attribute trl 1.16 GRPOTrainer._compute_loss reads, for the branches these cases take."""
    def get_logps(model, input_ids, attention_mask, logits_to_keep, compute_entropy=False, compute_aux_loss=False,
                  **kwargs):
        assert input_ids.shape == (B, 2 + T) and attention_mask.shape == (B, 2 + T) and logits_to_keep == T
        return new_logps_leaf, entropies, None

    args = types.SimpleNamespace(
        delta=None,
        use_bias_correction_kl=bias,
        steps_per_generation=STEPS_PER_GENERATION,
        epsilon=EPSILON,
        epsilon_high=eh,
        sapo_temperature_pos=SAPO_TEMPERATURE_POS,
        sapo_temperature_neg=SAPO_TEMPERATURE_NEG,
        vespo_k_pos=VESPO_K_POS,
        vespo_lambda_pos=VESPO_LAMBDA_POS,
        vespo_k_neg=VESPO_K_NEG,
        vespo_lambda_neg=VESPO_LAMBDA_NEG,
    )
    from trl import GRPOTrainer
    return types.SimpleNamespace(
        args=args,
        get_gamma_weights=GRPOTrainer.get_gamma_weights,
        _get_per_token_logps_and_entropies=get_logps,
        aux_loss_enabled=False,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level=level,
        beta=beta,
        loss_type=loss_type,
        epsilon_low=EPSILON,
        # GRPOTrainer.__init__: epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
        epsilon_high=eh if eh is not None else EPSILON,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=GRAD_ACCUM,
        max_completion_length=MAX_COMPLETION_LENGTH,
        accelerator=_Accelerator(),
        _entropy_bonus_enabled=False,
        entropy_coef=0.0,
        use_adaptive_entropy=False,
        _metrics={"train": collections.defaultdict(list), "eval": collections.defaultdict(list)},
    )


def hand_loss(new, old, ref, adv, mask, loss_type, level, eh, beta, bias):
    """The same loss written out (float32 torch, autograd-able); see the docstring."""
    eps_high = EPSILON if eh is None else eh
    log_ratio = new - old
    if level == "token":
        r = torch.exp(log_ratio)
    else:
        r = torch.exp((log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0))
    a = adv.unsqueeze(1)
    if loss_type == "cispo":
        L = -torch.clamp(r, max=eps_high).detach() * a * new
    elif loss_type == "sapo":
        tau = torch.where(a > 0, torch.tensor(SAPO_TEMPERATURE_POS), torch.tensor(SAPO_TEMPERATURE_NEG))
        L = -torch.sigmoid(tau * (r - 1)) * 4 / tau * a
    elif loss_type == "vespo":
        with torch.no_grad():
            log_w = (torch.clamp(log_ratio, -20, 20) * mask).sum(-1, keepdim=True).clamp(math.log(1e-8), 20)
            k = torch.where(a >= 0, torch.tensor(VESPO_K_POS), torch.tensor(VESPO_K_NEG))
            lam = torch.where(a >= 0, torch.tensor(VESPO_LAMBDA_POS), torch.tensor(VESPO_LAMBDA_NEG))
            phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w))
        L = -phi * a * new
    else:
        L = -torch.min(r * a, torch.clamp(r, 1 - EPSILON, 1 + eps_high) * a)
    if beta != 0.0:
        d = ref - new
        kl = torch.exp(d) - d - 1
        if bias:
            kl = kl * r
        L = L + beta * kl
    L = (L * mask).expand(B, T)
    if loss_type in ("grpo", "sapo"):
        return (L.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / GRAD_ACCUM
    if loss_type == "luspo":
        return L.sum(-1).mean() / GRAD_ACCUM
    if loss_type == "bnpo":
        return L.sum() / mask.sum().clamp(min=1.0) / GRAD_ACCUM
    if loss_type == "dr_grpo":
        return L.sum() / (B * MAX_COMPLETION_LENGTH) / GRAD_ACCUM
    if loss_type in ("dapo", "cispo", "vespo"):
        return L.sum() / (NUM_ITEMS_IN_BATCH / NUM_PROCESSES * GRAD_ACCUM / STEPS_PER_GENERATION)
    raise ValueError(loss_type)


# ---- 2. group advantages: grpo_trainer.py _generate_and_score_completions, "sum_then_normalize" ----
def trl_group_advantages(rewards_per_func, reward_weights, num_generations, scale_rewards, nanstd):
    # copied line for line from TRL 1.16 (single process, train mode)
    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * reward_weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ["group", "none"]:
        std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
        std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
    elif scale_rewards == "batch":
        std_rewards = nanstd(rewards).expand_as(rewards)
    else:
        raise ValueError(scale_rewards)
    advantages = rewards - mean_grouped_rewards
    if scale_rewards != "none":
        advantages = advantages / (std_rewards + 1e-4)
    advantages = torch.nan_to_num(advantages, nan=0.0)
    return rewards, advantages


# ---- 3. critic-free estimators (OpenRLHF style), float64 NumPy ----
def rloo_scores(s):
    g = s.reshape(-1, NUM_GENERATIONS)
    return (g - (g.sum(1, keepdims=True) - g) / (NUM_GENERATIONS - 1)).reshape(-1)


def reinforce_baseline_scores(s):
    g = s.reshape(-1, NUM_GENERATIONS)
    return (g - g.mean(1, keepdims=True)).reshape(-1)


def token_returns(est_scores, kl, m):
    rewards = -KL_COEF * kl
    for b, n in enumerate(LENGTHS):
        if n > 0:
            rewards[b, n - 1] += est_scores[b]
    rewards = rewards * m
    returns = np.zeros_like(rewards)
    running = np.zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + GAMMA * running
        returns[:, t] = running
    return returns * m


def masked_whiten(x, m):
    n = m.sum()
    mean = (x * m).sum() / n
    var = ((x - mean) ** 2 * m).sum() / n * (n / (n - 1))
    return (x - mean) * (1.0 / np.sqrt(var + 1e-8)) * m


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    from trl import GRPOTrainer
    from trl.trainer.utils import nanstd

    # ---- inputs ----
    lengths = torch.tensor(LENGTHS, dtype=torch.int64)
    mask_long = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.int64)
    mask = mask_long.to(torch.float32)
    g = torch.Generator().manual_seed(SEED)
    f32 = dict(generator=g, dtype=torch.float32)
    old_logps = -(torch.randn(B, T, **f32).abs() + 0.1)
    new_logps = old_logps + 0.6 * torch.randn(B, T, **f32)
    ref_logps = -(torch.randn(B, T, **f32).abs() + 0.1)
    advantages = torch.randn(B, **f32)
    # Shift one row with a positive advantage so that its sequence-level ratio lands between 1 + 0.2 and
    # 1 + 0.28: there clip-higher (epsilon_high 0.28) changes the sequence-level (GSPO) loss too.
    positive = int(torch.nonzero(advantages[[0, 3, 4]] > 0)[0].item()) if (advantages[[0, 3, 4]] > 0).any() else None
    if positive is not None:
        row = [0, 3, 4][positive]
        n = int(LENGTHS[row])
        current = ((new_logps[row, :n] - old_logps[row, :n]).mean()).item()
        new_logps[row, :n] += float(torch.log(torch.tensor(1.24)).item()) - current
    rewards_per_func = torch.randn(B, 2, **f32)
    rewards_per_func[4, 1] = float("nan")
    group_rewards = torch.tensor(GROUP_REWARDS, dtype=torch.float32)
    scores = 2 * torch.randn(B, **f32)
    kl = torch.randn(B, T, **f32).abs() * 0.1
    inputs = {"lengths": lengths, "mask": mask, "old_logps": old_logps, "new_logps": new_logps,
              "ref_logps": ref_logps, "advantages": advantages, "rewards_per_func": rewards_per_func,
              "group_rewards": group_rewards, "scores": scores, "kl": kl}
    expected = {}

    # ---- 1. TRL's GRPO loss ----
    entropies = 0.5 + 0.01 * torch.arange(B * T, dtype=torch.float32).view(B, T)  # read only by the metrics
    for loss_type, level, eh, beta, bias in all_cases():
        name = case_name(loss_type, level, eh, beta, bias)
        leaf = new_logps.clone().requires_grad_(True)
        stub = make_stub(leaf, entropies, loss_type, level, eh, beta, bias)
        trl_inputs = {
            "prompt_ids": torch.zeros(B, 2, dtype=torch.long),
            "prompt_mask": torch.ones(B, 2, dtype=torch.long),
            "completion_ids": torch.zeros(B, T, dtype=torch.long),
            "completion_mask": mask_long.clone(),
            "advantages": advantages.clone(),
            "old_per_token_logps": old_logps.clone(),
            "num_items_in_batch": torch.tensor(NUM_ITEMS_IN_BATCH),
        }
        if beta != 0.0:
            trl_inputs["ref_per_token_logps"] = ref_logps.clone()
        loss = GRPOTrainer._compute_loss(stub, None, trl_inputs)
        assert loss.dtype == torch.float32 and loss.dim() == 0, (name, loss.dtype, loss.shape)
        loss.backward()
        grad = leaf.grad.detach().clone()
        assert torch.isfinite(loss).item() and torch.isfinite(grad).all().item(), name
        assert (grad[mask == 0] == 0).all().item(), name  # padding / the empty row get no gradient
        assert len(stub._metrics["train"]) > 0, name  # the metric-logging tail ran
        # self-check against the hand-written formula (value and gradient)
        leaf2 = new_logps.clone().requires_grad_(True)
        ref_loss = hand_loss(leaf2, old_logps, ref_logps, advantages, mask, loss_type, level, eh, beta, bias)
        ref_loss.backward()
        assert abs(ref_loss.item() - loss.item()) <= 1e-6, (name, ref_loss.item(), loss.item())
        assert (leaf2.grad - grad).abs().max().item() <= 1e-6, name
        expected[f"loss.{name}"] = loss.detach().reshape(1)
        expected[f"grad.{name}"] = torch.where(mask.bool(), grad, torch.zeros(()))  # +0.0 at padding

    # ---- 2. group advantages ----
    one_func = group_rewards.unsqueeze(1)
    for scale in ("group", "batch", "none"):
        _, adv = trl_group_advantages(one_func.clone(), torch.tensor([1.0]), NUM_GENERATIONS, scale, nanstd)
        expected[f"adv.{scale}"] = adv
    assert (expected["adv.group"][3:] == 0).all().item() and (expected["adv.none"][3:] == 0).all().item()
    mixed, adv_mixed = trl_group_advantages(rewards_per_func.clone(), torch.tensor(REWARD_WEIGHTS),
                                            NUM_GENERATIONS, "group", nanstd)
    expected["rewards.mixed"] = mixed
    expected["adv.mixed.group"] = adv_mixed
    # float64 NumPy cross-check of section 2
    rpf = rewards_per_func.double().numpy()
    mixed64 = np.nansum(rpf * np.array(REWARD_WEIGHTS), axis=1)
    assert np.abs(mixed64 - mixed.double().numpy()).max() <= 1e-6
    for src, key in ((np.array(GROUP_REWARDS), "adv.group"), (mixed64, "adv.mixed.group")):
        gr = src.reshape(-1, NUM_GENERATIONS)
        a = ((gr - gr.mean(1, keepdims=True)) / (gr.std(1, ddof=1, keepdims=True) + 1e-4)).reshape(-1)
        assert np.abs(a - expected[key].double().numpy()).max() <= 1e-5, key
    gr = np.array(GROUP_REWARDS)
    a = (gr.reshape(-1, 3) - gr.reshape(-1, 3).mean(1, keepdims=True)).reshape(-1) / (gr.std(ddof=1) + 1e-4)
    assert np.abs(a - expected["adv.batch"].double().numpy()).max() <= 1e-5

    # ---- 3. critic-free PPO estimators ----
    m64, kl64, sc64 = mask.double().numpy(), kl.double().numpy(), scores.double().numpy()
    for est, fn in (("rloo", rloo_scores), ("reinforce_baseline", reinforce_baseline_scores)):
        s = fn(sc64)
        G = token_returns(s, kl64.copy(), m64)
        expected[f"{est}.scores"] = s
        expected[f"{est}.returns"] = G
        expected[f"{est}.advantages"] = masked_whiten(G, m64)
        for b, n in enumerate(LENGTHS):  # self-check: explicit suffix sums
            for t in range(n):
                want = sum(-KL_COEF * kl64[b, u] for u in range(t, n)) + s[b]
                assert abs(G[b, t] - want) <= 1e-12, (est, b, t)

    # ---- write ----
    def as_f32(x):
        t = torch.as_tensor(x).detach().to(torch.float32).contiguous().clone()
        return t.reshape(1) if t.ndim == 0 else t

    expected = {k: as_f32(v) for k, v in expected.items()}
    for k, v in expected.items():
        assert torch.isfinite(v).all().item(), k
        if v.dim() == 2:
            v = torch.where(mask.bool(), v, torch.zeros((), dtype=torch.float32)).contiguous()
            assert v.shape == (B, T) and not bool(torch.signbit(v[mask == 0]).any()), k
            expected[k] = v
    inputs = {k: v.detach().contiguous().clone() for k, v in inputs.items()}
    save_file(inputs, str(out / "inputs.safetensors"))
    save_file(expected, str(out / "expected.safetensors"))
    n_cases = len(all_cases())
    print(f"rl_grpo_loss: {n_cases} TRL _compute_loss cases, e.g. " + ", ".join(
        f"{k} {expected[k].item():.6f}" for k in ("loss.grpo.token.eh0.2.beta0", "loss.dapo.sequence.eh0.28.beta0.04",
                                                  "loss.dr_grpo.token.eh0.28.beta0.04.nobias")))
    print("  adv.group " + " ".join(f"{x:.6f}" for x in expected["adv.group"].tolist())
          + " | adv.mixed.group " + " ".join(f"{x:.6f}" for x in expected["adv.mixed.group"].tolist()))
    print(f"  {len(inputs)} inputs, {len(expected)} expected tensors -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
