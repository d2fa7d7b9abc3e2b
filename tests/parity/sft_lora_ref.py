#!/usr/bin/env python3
"""Reference for Ferry's LoRA SFT: loss, adapter gradients and the first optimizer step (peft on
transformers, CPU, fp32).

Usage: sft_lora_ref.py OUTDIR. Writes:
  model/                 a tiny random LlamaForCausalLM (vocab 2000 as data/tokenizer.model): the base
  init_adapter/          peft's adapter folder (PeftModel.save_pretrained) of get_peft_model(base,
                         LoraConfig(r=4, lora_alpha=8, dropout 0, all seven projections)) with every
                         lora_A and lora_B set to seeded random values (B non-zero, so A's gradients
                         are too)
  batch.safetensors      input_ids, attention_mask, position_ids, labels as in train_sft_ref.py
  expected.safetensors   loss; grad.<name> of every adapter by Ferry's name
                         (model.layers.0.self_attn.q_proj.lora_A.weight); grad_norm (before clipping);
                         after_step.<name>: the adapters after clip_grad_norm_(0.5) and one
                         torch.optim.AdamW step (lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1)
                         over the adapters only
"""
import pathlib
import sys

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB, PAD = 2000, 3
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def ferry_name(peft_name: str) -> str:
    # base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight -> model.layers.0...lora_A.weight
    assert peft_name.startswith("base_model.model."), peft_name
    return peft_name[len("base_model.model."):].replace(".default.", ".")


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.manual_seed(4321)
    torch.set_num_threads(1)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         rms_norm_eps=1e-5, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
                         initializer_range=0.1, tie_word_embeddings=False)
    base = LlamaForCausalLM(config)
    base.config.use_cache = False
    base.save_pretrained(out / "model", safe_serialization=True)

    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=TARGETS, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, lora)
    generator = torch.Generator().manual_seed(9)
    adapters = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.2)
                adapters[name] = p
    assert len(adapters) == 2 * 2 * len(TARGETS)
    model.save_pretrained(out / "init_adapter")

    # 3 rows of lengths 14, 9, 5 padded to 14; the last 4, 3, 2 real tokens are labelled.
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
    for name, p in model.named_parameters():
        assert (p.grad is not None) == ("lora_" in name), name  # the base is frozen
    expected = {"loss": loss.detach().reshape(1)}
    for name, p in adapters.items():
        expected["grad." + ferry_name(name)] = p.grad.detach().clone()
    params = list(adapters.values())
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm=0.5)
    expected["grad_norm"] = norm.detach().reshape(1)
    optimizer = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=False)
    optimizer.step()
    for name, p in adapters.items():
        expected["after_step." + ferry_name(name)] = p.detach().clone()
    save_file({k: v.contiguous() for k, v in expected.items()}, str(out / "expected.safetensors"))
    print(f"sft_lora: loss {loss.item():.6f}, adapter grad norm {norm.item():.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
