#!/usr/bin/env python3
"""Reference for Ferry's reward-model and DPO-family losses, computed by TRL's own trainers (CPU, fp32).

Usage: preference_losses_ref.py OUTDIR. Writes:
  policy/      a tiny random LlamaForCausalLM (vocab 2000 as data/tokenizer.model, hidden 64, 2 layers, 4 heads,
               2 KV heads, untied head), seed 1234
  reference/   the same config with other random weights (seed 4321): DPO's frozen reference
  reward/      a LlamaForSequenceClassification of that config, num_labels 1, pad_token_id 3, seed 99
  batch.safetensors
    input_ids, attention_mask, position_ids, labels (2B, T) int64, margin (B) float32, B = 3, T = 12.
    Rows 0..B-1 are the chosen sequences, B..2B-1 the rejected ones (pair i: rows i and B+i), each
    prompt + completion, RIGHT-padded with <pad> = 3, attention_mask 1 on real tokens. Prompts (3..8 tokens)
    start with BOS = 1 followed by random ids in 4..1999; a pair shares its prompt; completions are 1..5 random
    ids in 4..1999 followed by EOS = 2 (TRL's text paths append EOS to every completion), so 2..6 tokens.
    input_ids / attention_mask are exactly what TRL's DPO collator (trl.trainer.dpo_trainer.
    DataCollatorForPreference) builds from prompt_ids / chosen_ids / rejected_ids (the RewardTrainer's collator
    gives the same two tensors from prompt+chosen / prompt+rejected). labels = input_ids where the collator's
    completion_mask is 1, else -100 (prompt and padding), i.e. exactly the `labels` DPOTrainer builds; the logits
    at position t score labels[t+1] (HF causal shift; position 0 is never scored). No model is given
    position_ids: all run with HF's default, arange(T) on every row, which is what position_ids holds.
  expected.safetensors (float32; the per-pair tensors (B), every scalar shape (1))
    DPOTrainer (trl.DPOTrainer built on policy/ with ref_model=reference/; its loss code run on the batch):
      policy_chosen_logps, policy_rejected_logps, reference_chosen_logps, reference_rejected_logps:
          summed completion log-probs (DPO's `logps`), from DPOTrainer.compute_ref_log_probs(model, batch),
          the method that runs the same fused-LM-head forward and sum as _compute_loss, on trainer.model and
          trainer.ref_model
      loss.sigmoid (beta 0.1), loss.hinge (beta 0.1), loss.ipo (beta 0.5), loss.robust (beta 0.1,
          label_smoothing 0.1), and TRL 1.16's other loss types: loss.exo_pair (beta 0.1, label_smoothing 1e-3),
          loss.nca_pair, loss.bco_pair, loss.sppo_hard, loss.apo_zero, loss.apo_down, loss.sft, loss.sigmoid_norm
          (beta 0.1), loss.aot and loss.aot_unpaired (beta 0.1, label_smoothing 0.1; sorted over the batch's 3
          pairs), loss.discopop (beta 0.1, args.discopop_tau 0.07); with f_divergence_type (f-DPO):
          loss.sigmoid.forward_kl, loss.sigmoid.js_divergence, loss.sigmoid.alpha_divergence (alpha 0.5),
          loss.ipo.alpha_divergence1.5 (beta 0.5, alpha 1.5), loss.hinge.forward_kl, loss.discopop.js_divergence,
          loss.sigmoid_norm.forward_kl, loss.sigmoid_norm.js_divergence (per token, so js's log 2 does not cancel):
          DPOTrainer.compute_loss(trainer.model, batch), the trainer's beta /
          loss_types / label_smoothing / f_divergence_type / f_alpha_divergence_coef attributes set to each case
          in turn (the attributes _compute_loss reads). Combined losses (MPO) and LD-DPO (the trainer's
          loss_types / loss_weights / ld_alpha attributes): loss.mpo ([sigmoid, bco_pair, sft] weighted [0.8, 0.2,
          1.0], beta 0.1), loss.sigmoid.ld0.5 (ld_alpha 0.5), loss.ipo.ld0.5 (beta 0.5), loss.mpo.ld0.3 ([sigmoid,
          sft] weighted [1.0, 0.5], ld_alpha 0.3: the sft part is not length-weighted), loss.apo_zero.ld0 (ld_alpha
          0: only the shared length counts). TRL 1.16's
          "ipo" divides each completion's log-ratio by its completion length before the difference; its
          "sigmoid" ignores label_smoothing.
      dpo.rewards_chosen, dpo.rewards_rejected, dpo.rewards_margins, dpo.rewards_accuracies, dpo.logps_chosen,
          dpo.logps_rejected: what that trainer logged (self._metrics) for the sigmoid / beta 0.1 call:
          batch means of beta * log-ratio, their difference, (chosen reward > rejected reward), summed logps
      grad.sigmoid.<name> for every policy parameter (HF names): the gradient of loss.sigmoid (the batch mean)
          from backward() through that compute_loss call; the reference has no gradients
      loss.sigmoid_ls: conservative DPO, -(1-eps)*logsigmoid(beta*d) - eps*logsigmoid(-beta*d), mean over pairs,
          beta 0.1, eps 0.1, d = (pc - rc) - (pr - rr) the DPO log-ratio difference. TRL 1.16's DPOTrainer has no
          such form (its "sigmoid" ignores label_smoothing), so this is trl.experimental.cpo.CPOTrainer.cpo_loss
          (loss_type "sigmoid") called UNBOUND with a SimpleNamespace self (beta, label_smoothing, loss_type,
          alpha 0, accelerator.device) on the two log-ratios (pc - rc, pr - rr) in place of the policy logps
    CPOTrainer (trl.experimental.cpo.CPOTrainer on a copy of policy/, loss_type "simpo", beta 2.0, simpo_gamma 0.5,
    label_smoothing 0), its get_batch_loss_metrics run on the batch split into chosen_* / rejected_* halves:
      policy_chosen_avg_logps, policy_rejected_avg_logps: per-token mean completion log-probs, from
          CPOTrainer.concatenated_forward (average_log_prob is on for simpo; ORPOTrainer's agrees)
      loss.simpo (cpo_alpha 0), loss.simpo_cpo (cpo_alpha 1.0, the trainer's cpo_alpha attribute set): losses.mean()
          + cpo_alpha * the chosen rows' token-mean cross-entropy over completion tokens
    ORPOTrainer (trl.experimental.orpo.ORPOTrainer on a copy of policy/, beta 0.1), get_batch_loss_metrics:
      loss.orpo = orpo.nll - mean(beta * logsigmoid(log_odds)), log_odds from the per-token average logps;
      orpo.nll: TRL's chosen NLL, a token-mean cross-entropy over EVERY non-pad position of the chosen rows
          (prompt included, position 0 excepted): ORPOTrainer builds these labels from attention_mask, not from
          the completion labels;
      orpo.log_odds_ratio: the trainer's "log_odds_ratio" metric, mean over pairs of logsigmoid(log_odds)
    RewardTrainer (trl.RewardTrainer on reward/), compute_loss(model, batch) on input_ids / attention_mask:
      rm.rewards_chosen, rm.rewards_rejected: the model's logits (return_outputs=True), i.e. the score at each
          row's last non-pad token (LlamaForSequenceClassification: the rightmost token != pad_token_id 3)
      rm.loss (no margin, center_rewards_coefficient None), rm.loss_margin (the batch's margin passed in as TRL's
          "margin" input: -logsigmoid(rc - rr - margin)), rm.loss_centered (no margin, trainer.args.
          center_rewards_coefficient 0.01: + 0.01 * mean((rc + rr)^2)), rm.accuracy (the logged "accuracy" metric)
The trainers' placeholder train_dataset (one text pair for DPO / CPO / ORPO, tokenised by a LlamaTokenizer
converted from data/tokenizer.model; the batch's own ids for the RM) is only needed to construct them: no value
above is computed from it.
"""
import pathlib
import shutil
import sys
import tempfile
import types
import warnings

import torch
from safetensors.torch import save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
VOCAB, BOS, EOS, PAD = 2000, 1, 2, 3
B = 3
PROMPT_LENGTHS = [6, 3, 8]    # BOS included
CHOSEN_LENGTHS = [3, 6, 2]    # EOS included
REJECTED_LENGTHS = [5, 2, 4]  # EOS included
MARGINS = [0.0, 0.5, -0.25]


def llama_config(**extra):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                       rms_norm_eps=1e-5, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
                       initializer_range=0.1, tie_word_embeddings=False, **extra)


def common_args(output_dir):
    return dict(output_dir=output_dir, report_to="none", use_cpu=True, bf16=False, fp16=False,
                gradient_checkpointing=False, dataset_num_proc=None, seed=42, disable_tqdm=True)


def scalar(x):
    return torch.as_tensor(x, dtype=torch.float32).detach().reshape(1).clone()


def quiet_hf():
    """One thread; warnings, progress bars and datasets' cache off (every reference here runs so)."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    import datasets
    import transformers
    datasets.disable_progress_bars()
    datasets.disable_caching()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


def save_policy_and_reference(out):
    """The tiny random policy (seed 1234) and reference (seed 4321), saved as out/policy and out/reference."""
    from transformers import LlamaForCausalLM
    torch.manual_seed(1234)
    policy = LlamaForCausalLM(llama_config())
    torch.manual_seed(4321)
    reference = LlamaForCausalLM(llama_config())
    for m in (policy, reference):
        m.config.use_cache = False
        m.save_pretrained(out / ("policy" if m is policy else "reference"), safe_serialization=True)
    return policy, reference


def demo_tokenizer(tmp):
    """data/tokenizer.model as a LlamaTokenizer with <pad> as its pad token (the trainers need one to start)."""
    from transformers import LlamaTokenizer
    tokdir = pathlib.Path(tmp) / "tokenizer"
    tokdir.mkdir(exist_ok=True)
    shutil.copy(ROOT / "data" / "tokenizer.model", tokdir / "tokenizer.model")
    tok = LlamaTokenizer.from_pretrained(str(tokdir))
    tok.pad_token = "<pad>"
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (BOS, EOS, PAD)
    return tok


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    quiet_hf()
    import datasets
    from transformers import LlamaForCausalLM, LlamaForSequenceClassification
    from trl import DPOConfig, DPOTrainer, RewardConfig, RewardTrainer
    from trl.experimental.cpo import CPOConfig, CPOTrainer
    from trl.experimental.orpo import ORPOConfig, ORPOTrainer
    from trl.trainer.dpo_trainer import DataCollatorForPreference as DPOCollator
    from trl.trainer.reward_trainer import DataCollatorForPreference as RMCollator

    # Models (saved before any trainer patches or retags them).
    torch.manual_seed(1234)
    policy = LlamaForCausalLM(llama_config())
    torch.manual_seed(4321)
    reference = LlamaForCausalLM(llama_config())
    torch.manual_seed(99)
    reward = LlamaForSequenceClassification(llama_config(num_labels=1))
    for m in (policy, reference, reward):
        m.config.use_cache = False
    policy.save_pretrained(out / "policy", safe_serialization=True)
    reference.save_pretrained(out / "reference", safe_serialization=True)
    reward.save_pretrained(out / "reward", safe_serialization=True)

    # The batch, collated by TRL's DPO collator.
    g = torch.Generator().manual_seed(5)  # a seed whose pairs mix signs: DPO 2 of 3 right, RM 1 of 3
    examples = []
    for i in range(B):
        prompt = [BOS] + torch.randint(4, VOCAB, (PROMPT_LENGTHS[i] - 1,), generator=g).tolist()
        chosen = torch.randint(4, VOCAB, (CHOSEN_LENGTHS[i] - 1,), generator=g).tolist() + [EOS]
        rejected = torch.randint(4, VOCAB, (REJECTED_LENGTHS[i] - 1,), generator=g).tolist() + [EOS]
        examples.append({"prompt_ids": prompt, "chosen_ids": chosen, "rejected_ids": rejected})
    dpo_batch = DPOCollator(pad_token_id=PAD)(examples)
    input_ids = dpo_batch["input_ids"].long().contiguous()
    attention_mask = dpo_batch["attention_mask"].long().contiguous()
    completion_mask = dpo_batch["completion_mask"].long().contiguous()
    labels = input_ids.masked_fill(completion_mask == 0, -100)
    position_ids = torch.arange(input_ids.size(1)).expand_as(input_ids).contiguous()
    margin = torch.tensor(MARGINS, dtype=torch.float32)
    rm_batch = RMCollator(pad_token_id=PAD)(
        [{"chosen_ids": e["prompt_ids"] + e["chosen_ids"], "rejected_ids": e["prompt_ids"] + e["rejected_ids"],
          "margin": MARGINS[i]} for i, e in enumerate(examples)])
    assert torch.equal(rm_batch["input_ids"], input_ids) and torch.equal(rm_batch["attention_mask"], attention_mask)
    save_file({"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids,
               "labels": labels, "margin": margin}, str(out / "batch.safetensors"))

    def dpo_inputs():
        return {"input_ids": input_ids.clone(), "attention_mask": attention_mask.clone(),
                "completion_mask": completion_mask.clone()}

    def pair_inputs():  # CPO / ORPO's chosen_* / rejected_* layout; concatenated_inputs rebuilds the batch
        batch = {}
        for side, rows in (("chosen", slice(0, B)), ("rejected", slice(B, 2 * B))):
            batch[side + "_input_ids"] = input_ids[rows].clone()
            batch[side + "_attention_mask"] = attention_mask[rows].clone()
            batch[side + "_labels"] = labels[rows].clone()
        return batch

    expected = {}
    tmp = tempfile.mkdtemp(prefix="preference_losses_ref_")
    try:
        def tokenizer():
            return demo_tokenizer(tmp)

        text_pairs = datasets.Dataset.from_dict(
            {"prompt": ["What is 2 + 3?"], "chosen": ["5"], "rejected": ["6"]})

        # ---- DPO ----
        dpo = DPOTrainer(model=policy, ref_model=reference, processing_class=tokenizer(), train_dataset=text_pairs,
                         args=DPOConfig(beta=0.1, loss_type=["sigmoid"], label_smoothing=0.0,
                                        **common_args(tmp + "/dpo")))
        dpo.model.train()
        pc, pr = dpo.compute_ref_log_probs(dpo.model, dpo_inputs())
        rc, rr = dpo.compute_ref_log_probs(dpo.ref_model, dpo_inputs())
        expected.update(policy_chosen_logps=pc, policy_rejected_logps=pr,
                        reference_chosen_logps=rc, reference_rejected_logps=rr)

        dpo.model.zero_grad(set_to_none=True)
        dpo._metrics["train"].clear()
        loss = dpo.compute_loss(dpo.model, dpo_inputs())
        loss.backward()
        expected["loss.sigmoid"] = scalar(loss)
        for name, p in dpo.model.named_parameters():
            expected["grad.sigmoid." + name] = p.grad.detach().clone()
        assert all(p.grad is None for p in dpo.ref_model.parameters())
        logged = dpo._metrics["train"]
        for key, metric in (("rewards_chosen", "rewards/chosen"), ("rewards_rejected", "rewards/rejected"),
                            ("rewards_margins", "rewards/margins"), ("rewards_accuracies", "rewards/accuracies"),
                            ("logps_chosen", "logps/chosen"), ("logps_rejected", "logps/rejected")):
            assert len(logged[metric]) == 1
            expected["dpo." + key] = scalar(logged[metric][0])

        dpo.model.zero_grad(set_to_none=True)
        dpo.args.discopop_tau = 0.07  # not the default 0.05, so that a value not passed through shows
        for key, beta, loss_type, smoothing, divergence, alpha in (
                ("hinge", 0.1, "hinge", 0.0, "reverse_kl", 0.5), ("ipo", 0.5, "ipo", 0.0, "reverse_kl", 0.5),
                ("robust", 0.1, "robust", 0.1, "reverse_kl", 0.5),
                ("exo_pair", 0.1, "exo_pair", 1e-3, "reverse_kl", 0.5),
                ("nca_pair", 0.1, "nca_pair", 0.0, "reverse_kl", 0.5),
                ("bco_pair", 0.1, "bco_pair", 0.0, "reverse_kl", 0.5),
                ("sppo_hard", 0.1, "sppo_hard", 0.0, "reverse_kl", 0.5),
                ("aot", 0.1, "aot", 0.1, "reverse_kl", 0.5),
                ("aot_unpaired", 0.1, "aot_unpaired", 0.1, "reverse_kl", 0.5),
                ("apo_zero", 0.1, "apo_zero", 0.0, "reverse_kl", 0.5),
                ("apo_down", 0.1, "apo_down", 0.0, "reverse_kl", 0.5),
                ("discopop", 0.1, "discopop", 0.0, "reverse_kl", 0.5),
                ("sft", 0.1, "sft", 0.0, "reverse_kl", 0.5),
                ("sigmoid_norm", 0.1, "sigmoid_norm", 0.0, "reverse_kl", 0.5),
                ("sigmoid.forward_kl", 0.1, "sigmoid", 0.0, "forward_kl", 0.5),
                ("sigmoid.js_divergence", 0.1, "sigmoid", 0.0, "js_divergence", 0.5),
                ("sigmoid.alpha_divergence", 0.1, "sigmoid", 0.0, "alpha_divergence", 0.5),
                ("ipo.alpha_divergence1.5", 0.5, "ipo", 0.0, "alpha_divergence", 1.5),
                ("hinge.forward_kl", 0.1, "hinge", 0.0, "forward_kl", 0.5),
                ("discopop.js_divergence", 0.1, "discopop", 0.0, "js_divergence", 0.5),
                ("sigmoid_norm.forward_kl", 0.1, "sigmoid_norm", 0.0, "forward_kl", 0.5),
                ("sigmoid_norm.js_divergence", 0.1, "sigmoid_norm", 0.0, "js_divergence", 0.5)):
            dpo.beta, dpo.loss_types, dpo.loss_weights, dpo.label_smoothing = beta, [loss_type], [1.0], smoothing
            dpo.f_divergence_type, dpo.f_alpha_divergence_coef = divergence, alpha
            with torch.no_grad():
                expected["loss." + key] = scalar(dpo.compute_loss(dpo.model, dpo_inputs()))
        dpo.f_divergence_type = "reverse_kl"
        # MPO (several loss types with weights) and LD-DPO (ld_alpha), through the same compute_loss.
        for key, beta, loss_types, weights, ld_alpha in (
                ("mpo", 0.1, ["sigmoid", "bco_pair", "sft"], [0.8, 0.2, 1.0], None),
                ("sigmoid.ld0.5", 0.1, ["sigmoid"], [1.0], 0.5),
                ("ipo.ld0.5", 0.5, ["ipo"], [1.0], 0.5),
                ("mpo.ld0.3", 0.1, ["sigmoid", "sft"], [1.0, 0.5], 0.3),
                ("apo_zero.ld0", 0.1, ["apo_zero"], [1.0], 0.0)):
            dpo.beta, dpo.loss_types, dpo.loss_weights, dpo.label_smoothing = beta, loss_types, weights, 0.0
            dpo.ld_alpha = ld_alpha
            with torch.no_grad():
                expected["loss." + key] = scalar(dpo.compute_loss(dpo.model, dpo_inputs()))
        dpo.ld_alpha = None

        conservative = types.SimpleNamespace(alpha=0.0, beta=0.1, label_smoothing=0.1, loss_type="sigmoid",
                                             accelerator=types.SimpleNamespace(device=torch.device("cpu")))
        losses, _, _ = CPOTrainer.cpo_loss(conservative, pc - rc, pr - rr)
        expected["loss.sigmoid_ls"] = scalar(losses.mean())

        # ---- SimPO (CPO) ----
        cpo = CPOTrainer(model=LlamaForCausalLM.from_pretrained(out / "policy"), processing_class=tokenizer(),
                         train_dataset=text_pairs,
                         args=CPOConfig(loss_type="simpo", beta=2.0, simpo_gamma=0.5, label_smoothing=0.0,
                                        cpo_alpha=0.0, max_length=64, remove_unused_columns=False,
                                        **common_args(tmp + "/cpo")))
        assert cpo.pad_token_id == PAD
        concatenated = CPOTrainer.concatenated_inputs(pair_inputs(), padding_value=PAD)
        assert torch.equal(concatenated["concatenated_input_ids"], input_ids)
        assert torch.equal(concatenated["concatenated_attention_mask"], attention_mask)
        assert torch.equal(concatenated["concatenated_labels"], labels)
        with torch.no_grad():
            avg_c, avg_r = cpo.concatenated_forward(cpo.model, pair_inputs())[:2]
            expected["policy_chosen_avg_logps"], expected["policy_rejected_avg_logps"] = avg_c, avg_r
            expected["loss.simpo"] = scalar(cpo.get_batch_loss_metrics(cpo.model, pair_inputs())[0])
            cpo.cpo_alpha = 1.0
            expected["loss.simpo_cpo"] = scalar(cpo.get_batch_loss_metrics(cpo.model, pair_inputs())[0])

        # ---- ORPO ----
        orpo = ORPOTrainer(model=LlamaForCausalLM.from_pretrained(out / "policy"), processing_class=tokenizer(),
                           train_dataset=text_pairs,
                           args=ORPOConfig(beta=0.1, max_length=64, remove_unused_columns=False,
                                           **common_args(tmp + "/orpo")))
        assert orpo.padding_value == PAD
        with torch.no_grad():
            forward = orpo.concatenated_forward(orpo.model, pair_inputs())
            torch.testing.assert_close(forward[0], avg_c, rtol=0, atol=1e-5)
            torch.testing.assert_close(forward[1], avg_r, rtol=0, atol=1e-5)
            orpo_loss, orpo_metrics = orpo.get_batch_loss_metrics(orpo.model, pair_inputs())
        expected["loss.orpo"] = scalar(orpo_loss)
        expected["orpo.nll"] = scalar(forward[4])
        expected["orpo.log_odds_ratio"] = scalar(orpo_metrics["log_odds_ratio"])

        # ---- Reward model ----
        rm_pairs = datasets.Dataset.from_dict({"chosen_ids": [e["prompt_ids"] + e["chosen_ids"] for e in examples],
                                               "rejected_ids": [e["prompt_ids"] + e["rejected_ids"] for e in examples]})
        rm = RewardTrainer(model=reward, processing_class=tokenizer(), train_dataset=rm_pairs,
                           args=RewardConfig(center_rewards_coefficient=None, **common_args(tmp + "/rm")))
        assert rm.model.config.pad_token_id == PAD
        rm.model.train()
        rm_inputs = {"input_ids": input_ids.clone(), "attention_mask": attention_mask.clone()}
        with torch.no_grad():
            rm._metrics["train"].clear()
            rm_loss, rm_out = rm.compute_loss(rm.model, dict(rm_inputs), return_outputs=True)
            expected["rm.accuracy"] = scalar(rm._metrics["train"]["accuracy"][0])
            expected["rm.rewards_chosen"], expected["rm.rewards_rejected"] = rm_out.logits.squeeze(-1).chunk(2)
            expected["rm.loss"] = scalar(rm_loss)
            expected["rm.loss_margin"] = scalar(rm.compute_loss(rm.model, dict(rm_inputs, margin=margin.clone())))
            rm.args.center_rewards_coefficient = 0.01
            expected["rm.loss_centered"] = scalar(rm.compute_loss(rm.model, dict(rm_inputs)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    expected = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in expected.items()}
    save_file(expected, str(out / "expected.safetensors"))
    print("preference_losses: " + ", ".join(
        f"{k} {expected[k].item():.6f}" for k in ("loss.sigmoid", "loss.hinge", "loss.ipo", "loss.robust",
                                                  "loss.sigmoid_ls", "loss.simpo", "loss.simpo_cpo", "loss.orpo",
                                                  "rm.loss", "rm.loss_margin", "rm.loss_centered")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
