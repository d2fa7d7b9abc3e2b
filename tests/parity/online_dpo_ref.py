#!/usr/bin/env python3
"""Reference for Ferry's online DPO (`dpo.online`), computed by TRL 1.16's experimental OnlineDPOTrainer (CPU, fp32).

Usage: online_dpo_ref.py OUTDIR. Writes:
  policy/, reference/   tiny random LlamaForCausalLMs, as preference_losses_ref.py makes them (vocab 2000, hidden 64,
                        2 layers, seeds 1234 and 4321)
  batch.safetensors     one step of B = 3 prompts x 2 answers, in TRL's layout (rows 0..B-1 the first answers, B..2B-1
                        the second ones, row i and B + i answer prompt i):
    prompt_ids (2B, P) int64: BOS + random ids, P = 6 for every prompt (no left padding: TRL's forward passes no
        position ids, so a left-padded row would be scored at shifted positions)
    completion_ids, completion_mask (2B, R) int64: random ids in 4..1999, most ending with EOS = 2 then PAD = 3 (mask 1
        up to and including EOS, as TRL's truncate_right makes it); row 4 (prompt 1's second answer) has no EOS and
        fills R
    rewards (2B) float32: what the reward function returns for each row: [1, 0, 0.5, 0, 1, 0.5] — prompt 0's first
        answer wins, prompt 1's second, prompt 2's is a tie (TRL keeps the first as chosen)
  expected.safetensors (float32; scalars shape (1))
    loss.sigmoid (beta 0.1), loss.sigmoid_eos (beta 0.1, missing_eos_penalty 1.5: prompt 1's winner has no EOS and loses
        its pair), loss.sigmoid_beta (beta 0.5): OnlineDPOTrainer.training_step's returned loss with `_generate` stubbed
        to return the batch's prompt and completion ids and the reward function returning `rewards`
    grad.sigmoid.<name>: the policy's gradients from that first step's backward
    metrics of the first step (trainer.stats, TRL's names with / as _): rewards_chosen, rewards_rejected,
        rewards_margins, rewards_accuracies, logps_chosen, logps_rejected, objective_kl, objective_entropy,
        objective_non_score_reward, objective_scores, objective_scores_margin, val_contain_eos_token
"""
import pathlib
import shutil
import sys
import tempfile

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from preference_losses_ref import (BOS, EOS, PAD, VOCAB, common_args, demo_tokenizer, quiet_hf,  # noqa: E402
                                    save_policy_and_reference, scalar)

B, P, R = 3, 6, 5
ANSWER_LENGTHS = [3, 5, 2, 4, 5, 1]  # EOS included; row 4 has none and fills R
REWARDS = [1.0, 0.0, 0.5, 0.0, 1.0, 0.5]


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    quiet_hf()
    import datasets
    from transformers import LlamaForCausalLM
    from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer

    save_policy_and_reference(out)

    g = torch.Generator().manual_seed(3)
    prompts = torch.cat([torch.full((B, 1), BOS), torch.randint(4, VOCAB, (B, P - 1), generator=g)], 1)
    prompt_ids = prompts.repeat(2, 1)
    completion_ids = torch.full((2 * B, R), PAD, dtype=torch.long)
    completion_mask = torch.zeros(2 * B, R, dtype=torch.long)
    for row, length in enumerate(ANSWER_LENGTHS):
        if row == 4:
            completion_ids[row] = torch.randint(4, VOCAB, (R,), generator=g)
            completion_mask[row] = 1
            continue
        completion_ids[row, :length - 1] = torch.randint(4, VOCAB, (length - 1,), generator=g)
        completion_ids[row, length - 1] = EOS
        completion_mask[row, :length] = 1
    rewards = torch.tensor(REWARDS)
    save_file({"prompt_ids": prompt_ids.contiguous(), "completion_ids": completion_ids,
               "completion_mask": completion_mask, "rewards": rewards}, str(out / "batch.safetensors"))

    def reward_function(prompts, completions, **kwargs):
        return REWARDS

    expected = {}
    tmp = tempfile.mkdtemp(prefix="online_dpo_ref_")
    try:
        tok = demo_tokenizer(tmp)
        placeholder = datasets.Dataset.from_dict({"prompt": ["What is 2 + 3?"] * 4})

        def trainer(beta, penalty):
            args = OnlineDPOConfig(beta=beta, loss_type="sigmoid", missing_eos_penalty=penalty, max_new_tokens=R,
                                   max_length=P + R, per_device_train_batch_size=B,
                                   **{k: v for k, v in common_args(tmp + "/odpo").items() if k != "dataset_num_proc"})
            t = OnlineDPOTrainer(model=LlamaForCausalLM.from_pretrained(out / "policy"),
                                 ref_model=LlamaForCausalLM.from_pretrained(out / "reference"),
                                 reward_funcs=reward_function, processing_class=tok, train_dataset=placeholder,
                                 args=args)
            t._generate = lambda model, prompts, images=None: (
                prompt_ids.clone(), torch.ones_like(prompt_ids), completion_ids.clone(), completion_mask.clone(), None)
            return t

        step_inputs = {"prompt": ["a", "b", "c"]}
        first = trainer(0.1, None)
        first.model.zero_grad(set_to_none=True)
        expected["loss.sigmoid"] = scalar(first.training_step(first.model, dict(step_inputs)))
        for name, p in first.model.named_parameters():
            expected["grad.sigmoid." + name] = p.grad.detach().clone()
        for key, values in first.stats.items():
            if values:
                expected[key.replace("/", "_")] = scalar(values[0])
        for key, beta, penalty in (("sigmoid_eos", 0.1, 1.5), ("sigmoid_beta", 0.5, None)):
            t = trainer(beta, penalty)
            expected["loss." + key] = scalar(t.training_step(t.model, dict(step_inputs)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    expected = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in expected.items()}
    save_file(expected, str(out / "expected.safetensors"))
    print("online_dpo: " + ", ".join(f"{k} {expected[k].item():.6f}"
                                     for k in ("loss.sigmoid", "loss.sigmoid_eos", "loss.sigmoid_beta",
                                               "objective_kl", "rewards_margins")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
