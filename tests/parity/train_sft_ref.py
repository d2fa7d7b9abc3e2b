#!/usr/bin/env python3
"""Reference for Ferry's SFT loss, gradients and first optimizer step (transformers on CPU, fp32).

Usage: train_sft_ref.py OUTDIR. Writes:
  model/                 a tiny random LlamaForCausalLM (vocab 2000 as data/tokenizer.model)
  batch.safetensors      input_ids, attention_mask, position_ids, labels (B, T): right-padded rows,
                         labels -100 on prompt tokens and padding, as Ferry's SFT collation makes them
  expected.safetensors   loss (transformers' causal-LM loss: shifted, mean over label tokens),
                         grad.<name> for every parameter, grad_norm (before clipping), and
                         after_step.<name>: the weights after clip_grad_norm_(0.5) and one
                         torch.optim.AdamW step (lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay
                         0.1 on matrices, 0 on norm weights)
"""
import pathlib
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB, PAD = 2000, 3


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         rms_norm_eps=1e-5, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
                         initializer_range=0.1, tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    model.config.use_cache = False
    model.save_pretrained(out / "model", safe_serialization=True)

    # 3 rows of lengths 14, 9, 5 padded to 14; the last 4, 3, 2 real tokens are labelled.
    generator = torch.Generator().manual_seed(5)
    lengths, answers, width = [14, 9, 5], [4, 3, 2], 14
    ids = torch.full((3, width), PAD, dtype=torch.long)
    mask = torch.zeros(3, width, dtype=torch.long)
    labels = torch.full((3, width), -100, dtype=torch.long)
    positions = torch.zeros(3, width, dtype=torch.long)
    for row, (length, answer) in enumerate(zip(lengths, answers)):
        ids[row, :length] = torch.randint(4, VOCAB, (length,), generator=generator)
        ids[row, 0] = 1
        mask[row, :length] = 1
        labels[row, length - answer:length] = ids[row, length - answer:length]
        positions[row] = torch.arange(width)
    save_file({"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels},
              str(out / "batch.safetensors"))

    model.train()
    loss = model(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels).loss
    loss.backward()
    expected = {"loss": loss.detach().reshape(1)}
    for name, p in model.named_parameters():
        expected["grad." + name] = p.grad.detach().clone()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
    expected["grad_norm"] = norm.detach().reshape(1)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    optimizer.step()
    for name, p in model.named_parameters():
        expected["after_step." + name] = p.detach().clone()
    save_file({k: v.contiguous() for k, v in expected.items()}, str(out / "expected.safetensors"))
    print(f"train_sft: loss {loss.item():.6f}, grad norm {norm.item():.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
