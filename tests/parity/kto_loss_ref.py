#!/usr/bin/env python3
"""Reference for Ferry's KTO (`ferry train-kto`), computed by TRL 1.16's own KTOTrainer (CPU, fp32).

Usage: kto_loss_ref.py OUTDIR. Writes:
  policy/, reference/   tiny random LlamaForCausalLMs, as preference_losses_ref.py makes them (vocab 2000, hidden 64,
                        2 layers, seeds 1234 and 4321)
  batch.safetensors     one micro-batch of B = 4 unpaired examples, labels [True, False, False, True]:
    prompt_ids_<i>, completion_ids_<i> (int64): prompt = BOS + random ids in 4..1999 (3..7 tokens), completion =
        random ids + EOS (2..5 tokens); examples 0 and 2 share their prompt (the KL rows must still pair prompt i
        with completion i-1, even where that prompt equals another's)
    input_ids, attention_mask, completion_mask (B, T): TRL's DataCollatorForUnpairedPreference of the examples
    KL_input_ids, KL_attention_mask, KL_completion_mask (B, T_KL): its KL rows, from KL_completion_ids built as TRL's
        KTOTrainer._prepare_dataset builds them for a batch of per_device_train_batch_size examples: the completions
        rotated by one, [c_{B-1}, c_0, ..., c_{B-2}]
    label (B) int64
  expected.safetensors (float32; scalars shape (1))
    logps, reference_logps, kl_logps, reference_kl_logps (B): summed completion log-probs of the rows and the KL rows
        under the policy and the reference (KTOTrainer.compute_ref_log_probs on trainer.model and trainer.ref_model)
    loss.kto (beta 0.1), loss.kto_weighted (beta 0.3, desirable_weight 1.33, undesirable_weight 0.75),
    loss.apo_zero_unpaired (beta 0.1): KTOTrainer.compute_loss(trainer.model, batch) with the trainer's beta /
        desirable_weight / undesirable_weight / loss_type / calculate_KL attributes set to each case (the attributes
        _compute_loss reads; calculate_KL is False for apo_zero_unpaired, as the trainer sets it)
    kto.kl, kto.rewards_chosen, kto.rewards_rejected, kto.rewards_margins, kto.logps_chosen, kto.logps_rejected: what
        the trainer logged (self._metrics["train"]) for the loss.kto call
    grad.kto.<name> for every policy parameter (HF names): the gradient of loss.kto through that compute_loss call
The trainer's placeholder train_dataset (two text examples) is only needed to construct it.
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

LABELS = [True, False, False, True]
PROMPT_LENGTHS = [5, 3, 5, 7]      # BOS included; example 2 repeats example 0's prompt
COMPLETION_LENGTHS = [3, 5, 2, 4]  # EOS included


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    quiet_hf()
    import datasets
    from trl import KTOConfig, KTOTrainer
    from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference

    policy, reference = save_policy_and_reference(out)

    g = torch.Generator().manual_seed(11)
    examples = []
    for i, label in enumerate(LABELS):
        if i == 2:
            prompt = list(examples[0]["prompt_ids"])
        else:
            prompt = [BOS] + torch.randint(4, VOCAB, (PROMPT_LENGTHS[i] - 1,), generator=g).tolist()
        completion = torch.randint(4, VOCAB, (COMPLETION_LENGTHS[i] - 1,), generator=g).tolist() + [EOS]
        examples.append({"prompt_ids": prompt, "completion_ids": completion, "label": label})
    # KTOTrainer._prepare_dataset's add_kl_completion_ids, on one batch of per_device_train_batch_size examples.
    completions = [e["completion_ids"] for e in examples]
    for e, kl in zip(examples, [completions[-1]] + completions[:-1]):
        e["KL_completion_ids"] = kl
    batch = DataCollatorForUnpairedPreference(pad_token_id=PAD)(examples)
    tensors = {k: v.long().contiguous() for k, v in batch.items()}
    for i, e in enumerate(examples):
        tensors[f"prompt_ids_{i}"] = torch.tensor(e["prompt_ids"], dtype=torch.int64)
        tensors[f"completion_ids_{i}"] = torch.tensor(e["completion_ids"], dtype=torch.int64)
    save_file(tensors, str(out / "batch.safetensors"))

    def inputs():
        return {k: v.clone() for k, v in batch.items()}

    expected = {}
    tmp = tempfile.mkdtemp(prefix="kto_loss_ref_")
    try:
        tok = demo_tokenizer(tmp)
        placeholder = datasets.Dataset.from_dict(
            {"prompt": ["What is 2 + 3?", "What is 2 + 2?"], "completion": ["5", "5"], "label": [True, False]})
        kto = KTOTrainer(model=policy, ref_model=reference, processing_class=tok, train_dataset=placeholder,
                         args=KTOConfig(beta=0.1, loss_type="kto", per_device_train_batch_size=2,
                                        **common_args(tmp + "/kto")))
        kto.model.train()
        logps, kl_logps = kto.compute_ref_log_probs(kto.model, inputs())
        reference_logps, reference_kl_logps = kto.compute_ref_log_probs(kto.ref_model, inputs())
        expected.update(logps=logps, kl_logps=kl_logps, reference_logps=reference_logps,
                        reference_kl_logps=reference_kl_logps)

        kto.model.zero_grad(set_to_none=True)
        kto._metrics["train"].clear()
        loss = kto.compute_loss(kto.model, inputs())
        loss.backward()
        expected["loss.kto"] = scalar(loss)
        for name, p in kto.model.named_parameters():
            expected["grad.kto." + name] = p.grad.detach().clone()
        assert all(p.grad is None for p in kto.ref_model.parameters())
        logged = kto._metrics["train"]
        for key in ("kl", "rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected"):
            assert len(logged[key]) == 1, key
            expected["kto." + key.replace("/", "_")] = scalar(logged[key][0])

        kto.model.zero_grad(set_to_none=True)
        for key, beta, loss_type, desirable, undesirable in (
                ("kto_weighted", 0.3, "kto", 1.33, 0.75),
                ("apo_zero_unpaired", 0.1, "apo_zero_unpaired", 1.0, 1.0)):
            kto.beta, kto.loss_type = beta, loss_type
            kto.desirable_weight, kto.undesirable_weight = desirable, undesirable
            kto.calculate_KL = loss_type != "apo_zero_unpaired"
            with torch.no_grad():
                expected["loss." + key] = scalar(kto.compute_loss(kto.model, inputs()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    expected = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in expected.items()}
    save_file(expected, str(out / "expected.safetensors"))
    print("kto_loss: " + ", ".join(f"{k} {expected[k].item():.6f}"
                                   for k in ("loss.kto", "loss.kto_weighted", "loss.apo_zero_unpaired", "kto.kl")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
