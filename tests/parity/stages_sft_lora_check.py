#!/usr/bin/env python3
"""Checks what Ferry's LoRA SFT exported against peft and transformers (called by
stages_sft_lora_parity_test.cpp after a short Ferry training run).

Usage: stages_sft_lora_check.py BASE_DIR ADAPTER_DIR MERGED_DIR FERRY_LOGITS
  BASE_DIR      the base model (a Hugging Face folder)
  ADAPTER_DIR   Ferry's PEFT adapter folder (lora.export: adapter): loaded with
                peft.PeftModel.from_pretrained(base, ADAPTER_DIR)
  MERGED_DIR    Ferry's merged export: loaded with AutoModelForCausalLM.from_pretrained
  FERRY_LOGITS  safetensors with input_ids, attention_mask (B, T) and Ferry's logits (B, T, V) of
                the trained model (base + adapters, not merged)
Prints the largest difference of each and exits 1 when one exceeds 1e-4 (on tokens the mask keeps).
"""
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

TOLERANCE = 1e-4


def main() -> int:
    base_dir, adapter_dir, merged_dir, logits_file = sys.argv[1:5]
    torch.set_num_threads(1)
    data = load_file(logits_file)
    ids, mask, ferry = data["input_ids"], data["attention_mask"], data["logits"]
    keep = mask.bool()

    base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    peft_model = PeftModel.from_pretrained(base, adapter_dir)
    peft_model.eval()
    adapters = [n for n, _ in peft_model.named_parameters() if "lora_" in n]
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, torch_dtype=torch.float32)
    merged.eval()
    with torch.no_grad():
        peft_logits = peft_model(input_ids=ids, attention_mask=mask).logits
        merged_logits = merged(input_ids=ids, attention_mask=mask).logits
        with peft_model.disable_adapter():
            base_logits = peft_model(input_ids=ids, attention_mask=mask).logits
    peft_error = (peft_logits - ferry)[keep].abs().max().item()
    merged_error = (merged_logits - ferry)[keep].abs().max().item()
    adapter_effect = (base_logits - ferry)[keep].abs().max().item()
    print(f"lora check: {len(adapters)} adapter tensors; max |peft - ferry| {peft_error:.3g}, "
          f"max |merged - ferry| {merged_error:.3g}, max |base - ferry| {adapter_effect:.3g}")
    if len(adapters) == 0:
        print("lora check: peft loaded no adapters", file=sys.stderr)
        return 1
    if adapter_effect < 1e-3:
        print("lora check: the adapters do not change the logits; nothing was compared", file=sys.stderr)
        return 1
    return 0 if peft_error <= TOLERANCE and merged_error <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
