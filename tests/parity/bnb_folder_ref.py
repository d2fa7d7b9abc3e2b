#!/usr/bin/env python3
"""Reference for loading checkpoints bitsandbytes saved in 4 bits (src/io/hf_quantization.h,
src/model/nf4_model.h): what a downloaded "-bnb-4bit" model folder is. transformers 5 +
bitsandbytes 0.50.2 on the CPU, fp32.

Usage: bnb_folder_ref.py OUTDIR. Writes:
  float/       a tiny random LlamaForCausalLM (2 layers, hidden 72, intermediate 100, 4 heads of 18,
               2 KV heads, vocab 2000, untied), fp32: 72 x 100 = 7200 and 36 x 72 = 2592 elements
               are not multiples of the 64-element NF4 block, so the last block of those is partial
  dq1/         float/ loaded with BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
               bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=float32), dtype float32, then
               model.save_pretrained(dq1/): config.json with quantization_config, model.safetensors
               with each projection's uint8 codes and quant-state tensors
  dq0/         the same with bnb_4bit_use_double_quant=False and
               llm_int8_skip_modules=["lm_head", "o_proj"] (transformers leaves every o_proj in fp32,
               so the folder mixes 4-bit and full-precision projections)
  bf16_storage/  as dq1 with bnb_4bit_quant_storage=bfloat16 (the packed codes stored as bf16
               (n / 4, 1), the bytes unchanged: what FSDP set-ups save)
  <dq>/logits.safetensors  input_ids, attention_mask (2, 12) (the second row right-padded with
               two masked tokens) and logits (2, 12, 2000) of the 4-bit model
               transformers loads back from <dq>/ (AutoModelForCausalLM.from_pretrained(<dq>)),
               in training mode without gradients: bitsandbytes' MatMul4Bit path (dequantise, then
               linear), which Ferry's nf4_linear follows; in eval mode bnb may repack the weights
               for an AVX512-BF16 CPU kernel instead. Llama has no dropout, so the logits are the
               model's.
When bitsandbytes is not installed (ImportError), writes OUTDIR/SKIPPED ("[needs bitsandbytes] ...")
and exits 0: the C++ test then skips, and scripts/skip_guard.py allows that only where the deps venv
has no bitsandbytes. Any other error while importing it fails this fixture (and so the test).
"""
import pathlib
import sys

import torch
from safetensors.torch import save_file


def make_inputs():
    generator = torch.Generator().manual_seed(5)
    ids = torch.randint(4, 2000, (2, 12), generator=generator)
    ids[:, 0] = 1
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 10:] = 0
    ids[1, 10:] = 3
    return ids, mask


def save_4bit(float_dir, out, double_quant, skip_modules, storage=torch.uint8):
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    import bitsandbytes as bnb

    quantization = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                      bnb_4bit_use_double_quant=double_quant, bnb_4bit_compute_dtype=torch.float32,
                                      llm_int8_skip_modules=skip_modules, bnb_4bit_quant_storage=storage)
    model = AutoModelForCausalLM.from_pretrained(float_dir, quantization_config=quantization, dtype=torch.float32,
                                                 device_map="cpu")
    model.save_pretrained(out)
    # What the folder means: transformers' model loaded back from it.
    loaded = AutoModelForCausalLM.from_pretrained(out, device_map="cpu")
    linear4 = [n for n, m in loaded.named_modules() if isinstance(m, bnb.nn.Linear4bit)]
    expected = 2 * (7 if skip_modules is None else 6)
    assert len(linear4) == expected, f"{out}: {len(linear4)} Linear4bit modules, expected {expected}"
    ids, mask = make_inputs()
    loaded.train()
    with torch.no_grad():
        logits = loaded(input_ids=ids, attention_mask=mask).logits.float()
        model.train()
        before = model(input_ids=ids, attention_mask=mask).logits.float()
    assert torch.equal(logits, before), "the saved folder loads back to a different model"
    save_file({"input_ids": ids, "attention_mask": mask, "logits": logits.contiguous()}, str(out / "logits.safetensors"))
    print(f"bnb folder {out.name}: {len(linear4)} Linear4bit, double quant {double_quant}, bitsandbytes {bnb.__version__}")


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "SKIPPED").unlink(missing_ok=True)
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as e:  # the deps venv without bitsandbytes: the C++ test skips
        (out / "SKIPPED").write_text(f"[needs bitsandbytes] bitsandbytes cannot be imported: {e}\n")
        print(f"bnb folder: skipped ({e})")
        return 0
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(97)
    torch.set_num_threads(1)
    config = LlamaConfig(vocab_size=2000, hidden_size=72, intermediate_size=100, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         rms_norm_eps=1e-5, pad_token_id=3, bos_token_id=1, eos_token_id=2,
                         initializer_range=0.1, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(out / "float")
    save_4bit(out / "float", out / "dq1", True, None)
    save_4bit(out / "float", out / "dq0", False, ["lm_head", "o_proj"])
    save_4bit(out / "float", out / "bf16_storage", True, None, torch.bfloat16)
    return 0


if __name__ == "__main__":
    sys.exit(main())
