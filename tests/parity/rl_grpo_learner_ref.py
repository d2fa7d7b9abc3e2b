#!/usr/bin/env python3
"""Reference for Ferry's GRPO learner (train/rl/grpo_learner.cpp) as a whole: its loss normalisation over a rollout's
micro-batches, optimizer steps and iterations, against TRL 1.16's GRPOTrainer training on the same batch (CPU, fp32).

Usage: rl_grpo_learner_ref.py OUTDIR. Runs in ~15 s on one CPU thread.

rl_grpo_loss_ref.py checks grpo_loss() for a GrpoLossScale set by hand; this one checks the scale the learner itself
derives from its config and experience (micro-batches per step and per rollout, the rollout's token count,
max_completion_length), by comparing what the learner logs and the gradients it leaves against a real GRPOTrainer.

TRL side: one real trl.GRPOTrainer per (config, loss type), built from GRPOConfig (per_device_train_batch_size,
gradient_accumulation_steps, steps_per_generation, num_iterations, max_completion_length, loss_type, beta, epsilon,
epsilon_high, importance_sampling_level, temperature 1) on policy/ below. Its generation is replaced by the batch below:
the trainer's `_prepare_inputs` returns the micro-batch it is given, and `current_gradient_accumulation_steps` is set
to gradient_accumulation_steps (what transformers' training loop sets for a full accumulation window). Each
micro-batch then goes through GRPOTrainer.training_step -> transformers Trainer.training_step -> GRPOTrainer.
compute_loss -> _compute_loss (TRL's own fused-LM-head forward, loss and normalisation; loss_is_scaled_for_ga, so the
returned loss is what is backpropagated). The generation batch is split, in row order, into steps_per_generation
micro-batches of per_device_train_batch_size rows (TRL's split_tensor_dict; its shuffle is left out: the C++ test
hands Ferry's learner the rows so that its own shuffle yields this order), gradient_accumulation_steps of them per
optimizer step; with num_iterations 2 the same micro-batches are used again (TRL's buffered inputs). No optimizer
step is taken (the C++ test runs the learner at learning rate 0), so every step sees the same weights.
Every micro-batch carries num_items_in_batch = the generation batch's completion tokens (TRL:
gather(loss_mask.sum()).sum()), old_per_token_logps (TRL computes them when steps_per_generation >
gradient_accumulation_steps or num_iterations > 1, which holds in both configs) and, with beta != 0,
ref_per_token_logps.

Files:
  policy/   a tiny random LlamaForCausalLM (vocab 128, hidden 32, intermediate 64, 2 layers, 4 heads, 2 KV heads,
            untied head), seed 2026
  inputs.safetensors
    prompt_ids (B, P) int64, B = 8 rows (2 prompts x 4 generations, rows 0-3 and 4-7), P = 4: BOS 1 + random ids
        in 4..127, the same within a group; every prompt is P long (no left padding: TRL's forward passes no
        position ids)
    prompt_index (B) int64 = [0, 0, 0, 0, 1, 1, 1, 1]
    completion_ids, completion_mask (B, R) int64, R = 7: lengths [7, 3, 5, 1, 6, 2, 4, 7] (completion_mask 1 on
        the first length[b] columns); random ids in 4..127 ending with EOS 2 where length < R, then PAD 3
    advantages (B) float32: randn (generator seed 11)
    old_logps, ref_logps (B, R) float32: the policy's own per-token log-probs (computed by the trainer's
        _get_per_token_logps_and_entropies without gradients) + 0.25 * randn and + 0.3 * randn, 0 outside the
        mask: ratios away from 1, so the clip, the soft gates and VESPO's weights all act
  expected.safetensors, for each config c and loss type t in [grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo]:
    loss.<c>.<t> (1): the mean over the optimizer steps of each step's summed training_step losses (the learner's
        logged policy_loss)
    grad_norm.<c>.<t> (1): the L2 norm of the last optimizer step's gradient
    grad.<c>.<t>.<name>: the last optimizer step's gradient of every policy parameter (HF names)
  Configs (Ferry's setting -> TRL's):
    steps2:      train.micro_batch_size 2 -> per_device_train_batch_size 2; train.grad_accumulation 2 ->
                 gradient_accumulation_steps 2; a rollout of 8 rows -> steps_per_generation 4 (2 optimizer steps);
                 grpo.num_iterations 1; generation.max_new_tokens 9 -> max_completion_length 9 (> R);
                 beta 0.04, epsilon 0.2, epsilon_high 0.28, importance_sampling_level token; train.share_prompts
                 off
    iterations2: micro_batch_size 2, grad_accumulation 4 -> steps_per_generation 4 (1 optimizer step);
                 num_iterations 2 (2 steps over the same rows); rollout.environment set, so
                 rollout.max_total_tokens 13 -> max_completion_length 13 (generation.max_new_tokens 9 is not the
                 budget of a multi-turn episode); beta 0, epsilon 0.2 (epsilon_high unset), level sequence;
                 share_prompts on
  VESPO / SAPO use TRL's defaults (vespo_k_pos 2, vespo_lambda_pos 3, vespo_k_neg 3, vespo_lambda_neg 2; sapo 1.0,
  1.05), Ferry's defaults too.
"""
import pathlib
import shutil
import sys
import tempfile

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from preference_losses_ref import (BOS, EOS, PAD, common_args, demo_tokenizer, quiet_hf,  # noqa: E402
                                   scalar)

VOCAB = 128
B, P, R = 8, 4, 7
GENERATIONS = 4
LENGTHS = [7, 3, 5, 1, 6, 2, 4, 7]
LOSS_TYPES = ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"]
CONFIGS = {
    "steps2": dict(micro=2, accumulation=2, steps_per_generation=4, num_iterations=1, max_completion_length=9,
                   beta=0.04, epsilon_high=0.28, level="token"),
    "iterations2": dict(micro=2, accumulation=4, steps_per_generation=4, num_iterations=2, max_completion_length=13,
                        beta=0.0, epsilon_high=None, level="sequence"),
}


def tiny_config():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
                       pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, initializer_range=0.2,
                       tie_word_embeddings=False, use_cache=False)


def make_batch():
    g = torch.Generator().manual_seed(5)
    prompt_ids = torch.cat([torch.full((B, 1), BOS), torch.randint(4, VOCAB, (2, P - 1), generator=g)
                            .repeat_interleave(GENERATIONS, 0)], 1)
    completion_ids = torch.full((B, R), PAD, dtype=torch.long)
    completion_mask = torch.zeros(B, R, dtype=torch.long)
    for row, n in enumerate(LENGTHS):
        completion_ids[row, :n] = torch.randint(4, VOCAB, (n,), generator=g)
        if n < R:
            completion_ids[row, n - 1] = EOS
        completion_mask[row, :n] = 1
    return prompt_ids, completion_ids, completion_mask


def make_trainer(out, tmp, tok, config, loss_type):
    from datasets import Dataset
    from transformers import LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer
    args = GRPOConfig(per_device_train_batch_size=config["micro"], gradient_accumulation_steps=config["accumulation"],
                      steps_per_generation=config["steps_per_generation"], num_iterations=config["num_iterations"],
                      num_generations=GENERATIONS, max_completion_length=config["max_completion_length"],
                      loss_type=loss_type, beta=config["beta"], epsilon=0.2, epsilon_high=config["epsilon_high"],
                      importance_sampling_level=config["level"], temperature=1.0, learning_rate=0.0,
                      **{k: v for k, v in common_args(tmp + "/grpo").items() if k != "dataset_num_proc"})
    trainer = GRPOTrainer(model=LlamaForCausalLM.from_pretrained(out / "policy"),
                          reward_funcs=lambda completions, **kwargs: [0.0] * len(completions), args=args,
                          train_dataset=Dataset.from_dict({"prompt": ["What is 2 + 3?"] * 8}), processing_class=tok)
    trainer._prepare_inputs = lambda inputs: inputs  # the batch below stands in for generation
    trainer.current_gradient_accumulation_steps = config["accumulation"]  # as transformers' loop sets it
    assert trainer.loss_type == loss_type and trainer.max_completion_length == config["max_completion_length"]
    assert trainer.args.steps_per_generation == config["steps_per_generation"]
    return trainer


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    quiet_hf()
    from transformers import LlamaForCausalLM

    torch.manual_seed(2026)
    LlamaForCausalLM(tiny_config()).save_pretrained(out / "policy", safe_serialization=True)
    prompt_ids, completion_ids, completion_mask = make_batch()
    mask = completion_mask.to(torch.float32)
    expected = {}
    tmp = tempfile.mkdtemp(prefix="rl_grpo_learner_ref_")
    try:
        tok = demo_tokenizer(tmp)
        # The policy's own log-probs, as the trainer's forward gives them, perturbed into old and ref.
        probe = make_trainer(out, tmp, tok, CONFIGS["steps2"], "dapo")
        with torch.no_grad():
            logps, _, _ = probe._get_per_token_logps_and_entropies(
                probe.model, torch.cat([prompt_ids, completion_ids], 1),
                torch.cat([torch.ones_like(prompt_ids), completion_mask], 1), R)
        g = torch.Generator().manual_seed(11)
        advantages = torch.randn(B, generator=g)
        old_logps = ((logps + 0.25 * torch.randn(B, R, generator=g)) * mask).contiguous()
        ref_logps = ((logps + 0.3 * torch.randn(B, R, generator=g)) * mask).contiguous()
        num_items = completion_mask.sum()
        assert int(num_items) == sum(LENGTHS)

        for cname, config in CONFIGS.items():
            micro, accumulation = config["micro"], config["accumulation"]
            micro_batches = []
            for first in range(0, B, micro):
                rows = slice(first, first + micro)
                inputs = {"prompt_ids": prompt_ids[rows].clone(), "prompt_mask": torch.ones_like(prompt_ids[rows]),
                          "completion_ids": completion_ids[rows].clone(),
                          "completion_mask": completion_mask[rows].clone(), "advantages": advantages[rows].clone(),
                          "old_per_token_logps": old_logps[rows].clone(), "num_items_in_batch": num_items.clone()}
                if config["beta"] != 0.0:
                    inputs["ref_per_token_logps"] = ref_logps[rows].clone()
                micro_batches.append(inputs)
            assert len(micro_batches) == config["steps_per_generation"]
            for loss_type in LOSS_TYPES:
                name = f"{cname}.{loss_type}"
                trainer = make_trainer(out, tmp, tok, config, loss_type)
                model = trainer.model
                step_losses = []
                for _ in range(config["num_iterations"]):
                    for first in range(0, len(micro_batches), accumulation):
                        model.zero_grad(set_to_none=True)
                        total = 0.0
                        for inputs in micro_batches[first:first + accumulation]:
                            total += trainer.training_step(model, dict(inputs), None).item()
                        step_losses.append(total)
                grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
                assert all(torch.isfinite(v).all() for v in grads.values()), name
                expected[f"loss.{name}"] = scalar(sum(step_losses) / len(step_losses))
                expected[f"grad_norm.{name}"] = scalar(torch.sqrt(sum((v.double() ** 2).sum() for v in grads.values())))
                for n, v in grads.items():
                    expected[f"grad.{name}.{n}"] = v
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    save_file({"prompt_ids": prompt_ids.contiguous(), "prompt_index": torch.tensor([0] * 4 + [1] * 4),
               "completion_ids": completion_ids, "completion_mask": completion_mask,
               "advantages": advantages.contiguous(), "old_logps": old_logps, "ref_logps": ref_logps},
              str(out / "inputs.safetensors"))
    expected = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in expected.items()}
    save_file(expected, str(out / "expected.safetensors"))
    print("rl_grpo_learner: " + ", ".join(f"{k} {expected[k].item():.6f}" for k in expected if k.startswith("loss.")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
