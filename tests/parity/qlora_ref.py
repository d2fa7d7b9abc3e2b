#!/usr/bin/env python3
"""Reference for Ferry's QLoRA (lora.quantize_base nf4): one forward/backward of a LoRA model on a
4-bit NF4 base with double quantisation, by transformers + bitsandbytes + peft on the CPU, fp32
compute.

Usage: qlora_ref.py OUTDIR. Writes:
  model/                 a tiny random LlamaForCausalLM (2 layers, hidden 64, vocab 2000), fp32
  init_adapter/          peft's adapter folder of get_peft_model(<the base loaded in 4 bits>,
                         LoraConfig(r=4, lora_alpha=8, dropout 0, all seven projections)) with every
                         lora_A / lora_B set to seeded random values
  batch.safetensors      input_ids, attention_mask, position_ids, labels (as sft_lora_ref.py)
  nf4.safetensors        bnb's 4-bit state of every decoder projection as transformers holds it after
                         loading (model.layers.<i>.<proj>.weight and its absmax, quant_map,
                         nested_absmax, nested_quant_map, quant_state.bitsandbytes__nf4)
  expected.safetensors   loss; grad.<name> of every adapter by Ferry's name
                         (model.layers.0.self_attn.q_proj.lora_A.weight)
  bf16/                  the same in bf16: the base loaded with dtype bfloat16 and
                         bnb_4bit_compute_dtype bfloat16 (the weights are cast to bf16, then
                         quantised), the adapters in bf16 too (autocast_adapter_dtype=False) holding
                         the fp32 adapters' values rounded: nf4.safetensors, init_adapter/,
                         expected.safetensors (loss and gradients widened to fp32)
The base is loaded with BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=float32) on the CPU: every projection is a
bnb.nn.Linear4bit; embeddings, norms and lm_head stay fp32.
"""
import pathlib
import sys

import bitsandbytes as bnb
import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

VOCAB, PAD = 2000, 3
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def ferry_name(peft_name: str) -> str:
    assert peft_name.startswith("base_model.model."), peft_name
    return peft_name[len("base_model.model."):].replace(".default.", ".")


def make_batch(generator):
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
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels}


def run(out, model_dir, dtype, adapter_values=None):
    """Loads model_dir in 4 bits with `dtype` compute, attaches LoRA, writes out/{nf4,expected}."""
    out.mkdir(parents=True, exist_ok=True)
    quantization = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                      bnb_4bit_compute_dtype=dtype)
    base = LlamaForCausalLM.from_pretrained(model_dir, quantization_config=quantization, dtype=dtype, device_map="cpu")
    base.config.use_cache = False
    linear4 = [m for m in base.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(linear4) == 2 * len(TARGETS), f"expected 14 Linear4bit projections, got {len(linear4)}"
    nf4 = {k: v.contiguous() for k, v in base.state_dict().items()
           if k.startswith("model.layers.") and "_proj.weight" in k}
    save_file(nf4, str(out / "nf4.safetensors"))
    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=TARGETS, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, lora, autocast_adapter_dtype=False)
    generator = torch.Generator().manual_seed(13)
    adapters, values = {}, {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                assert p.dtype == dtype, (name, p.dtype)
                value = adapter_values[name] if adapter_values else torch.randn(p.shape, generator=generator) * 0.2
                p.copy_(value)
                adapters[name], values[name] = p, value
    assert len(adapters) == 2 * 2 * len(TARGETS)
    model.save_pretrained(out / "init_adapter")
    batch = make_batch(torch.Generator().manual_seed(21))
    save_file(batch, str(out / "batch.safetensors"))
    model.train()
    loss = model(**batch).loss
    loss.backward()
    for name, p in model.named_parameters():
        assert (p.grad is not None) == ("lora_" in name), name
    expected = {"loss": loss.detach().float().reshape(1)}
    for name, p in adapters.items():
        expected["grad." + ferry_name(name)] = p.grad.detach().float().clone()
    save_file({k: v.contiguous() for k, v in expected.items()}, str(out / "expected.safetensors"))
    print(f"qlora {dtype}: loss {loss.item():.6f} on a 4-bit base ({len(linear4)} Linear4bit), "
          f"bitsandbytes {bnb.__version__}")
    return values


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.manual_seed(2468)
    torch.set_num_threads(1)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         rms_norm_eps=1e-5, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
                         initializer_range=0.1, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(out / "model", safe_serialization=True)

    values = run(out, out / "model", torch.float32)
    run(out / "bf16", out / "model", torch.bfloat16, values)
    return 0


if __name__ == "__main__":
    sys.exit(main())
