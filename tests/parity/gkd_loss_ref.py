#!/usr/bin/env python3
"""Reference for Ferry's on-policy distillation loss (`ferry train-distill`): TRL 1.16's GKD divergence,
GKDTrainer.generalized_jsd_loss, on the logits of tiny random Llamas (CPU, fp32).

Usage: gkd_loss_ref.py OUTDIR. Writes:
  student/   a tiny random LlamaForCausalLM as preference_losses_ref.py makes it (vocab 2000, hidden 64, 2 layers),
             seed 1234
  teacher/   a larger one sharing the vocabulary (hidden 96, intermediate 256, 3 layers, 4 heads, 2 KV heads), seed 77
  batch.safetensors
    input_ids, attention_mask, position_ids, labels (B, T) int64, B = 3: BOS + a prompt of random ids, then an answer
        ending with EOS, right-padded with PAD = 3; labels = input_ids on the answer tokens, -100 elsewhere (the
        collator convention GKDTrainer.compute_loss relies on)
  expected.safetensors (float32; scalars shape (1))
    loss.beta<b>.t<T> for (beta, temperature) in (0.5, 1), (0, 1), (1, 1), (0.1, 1), (0.5, 0.7), (0.9, 2):
        GKDTrainer.generalized_jsd_loss(student_logits[:, :-1], teacher_logits[:, :-1], labels[:, 1:], beta=beta,
        temperature=temperature) — the static method GKDTrainer.compute_loss calls with the same shift and labels
        (reduction "batchmean": the sum over the answer tokens and the vocabulary divided by the answer tokens)
    grad.<name> for every student parameter (HF names): the gradient of loss.beta0.5.t1
"""
import pathlib
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from preference_losses_ref import BOS, EOS, PAD, VOCAB, llama_config, quiet_hf, scalar  # noqa: E402

CASES = [(0.5, 1.0), (0.0, 1.0), (1.0, 1.0), (0.1, 1.0), (0.5, 0.7), (0.9, 2.0)]
PROMPTS = [4, 7, 3]   # BOS included
ANSWERS = [5, 2, 6]   # EOS included


def case_name(beta, temperature):
    return f"loss.beta{beta:g}.t{temperature:g}"


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    quiet_hf()
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.experimental.gkd import GKDTrainer

    torch.manual_seed(1234)
    student = LlamaForCausalLM(llama_config())
    torch.manual_seed(77)
    teacher = LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=96, intermediate_size=256, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, pad_token_id=PAD, bos_token_id=BOS,
        eos_token_id=EOS, initializer_range=0.1, tie_word_embeddings=False))
    for m in (student, teacher):
        m.config.use_cache = False
    student.save_pretrained(out / "student", safe_serialization=True)
    teacher.save_pretrained(out / "teacher", safe_serialization=True)

    g = torch.Generator().manual_seed(21)
    width = max(p + a for p, a in zip(PROMPTS, ANSWERS))
    input_ids = torch.full((len(PROMPTS), width), PAD, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    labels = torch.full_like(input_ids, -100)
    for row, (p, a) in enumerate(zip(PROMPTS, ANSWERS)):
        ids = [BOS] + torch.randint(4, VOCAB, (p + a - 2,), generator=g).tolist() + [EOS]
        input_ids[row, :p + a] = torch.tensor(ids)
        attention_mask[row, :p + a] = 1
        labels[row, p:p + a] = input_ids[row, p:p + a]
    position_ids = torch.arange(width).expand_as(input_ids).contiguous()
    save_file({"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids,
               "labels": labels}, str(out / "batch.safetensors"))

    student.train()
    teacher.eval()
    with torch.no_grad():
        teacher_logits = teacher(input_ids=input_ids, attention_mask=attention_mask).logits
    student_logits = student(input_ids=input_ids, attention_mask=attention_mask).logits
    expected = {}
    for beta, temperature in CASES:
        loss = GKDTrainer.generalized_jsd_loss(student_logits[:, :-1], teacher_logits[:, :-1], labels[:, 1:],
                                               beta=beta, temperature=temperature)
        expected[case_name(beta, temperature)] = scalar(loss)
        if (beta, temperature) == CASES[0]:
            loss.backward(retain_graph=True)
            for name, p in student.named_parameters():
                expected["grad." + name] = p.grad.detach().clone()

    expected = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in expected.items()}
    save_file(expected, str(out / "expected.safetensors"))
    print("gkd_loss: " + ", ".join(f"{case_name(b, t)} {expected[case_name(b, t)].item():.6f}" for b, t in CASES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
