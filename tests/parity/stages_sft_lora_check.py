#!/usr/bin/env python3
"""Checks what Ferry's LoRA SFT exported against peft and transformers (called by
stages_sft_lora_parity_test.cpp after a short Ferry training run).

Usage: stages_sft_lora_check.py BASE_DIR ADAPTER_DIR MERGED_DIR FERRY_LOGITS [PROBE]
  BASE_DIR      the base model (a Hugging Face folder)
  ADAPTER_DIR   Ferry's PEFT adapter folder (lora.export: adapter): loaded with
                peft.PeftModel.from_pretrained(base, ADAPTER_DIR)
  MERGED_DIR    Ferry's merged export: loaded with AutoModelForCausalLM.from_pretrained
  FERRY_LOGITS  safetensors with input_ids, attention_mask (B, T) and Ferry's logits (B, T, V) of
                the trained model (base + adapters, not merged)
  PROBE         optional json {"text", "ids"}: Ferry's ids of `text` (special tokens as ids); the
                tokenizer transformers loads from MERGED_DIR must encode it the same
                (add_special_tokens=False)
Prints the largest difference of each and exits 1 when one exceeds 1e-4 (on tokens the mask keeps).
"""
import json
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

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
    if peft_error > TOLERANCE or merged_error > TOLERANCE:
        return 1
    if len(sys.argv) > 5:
        with open(sys.argv[5]) as f:
            probe = json.load(f)
        ids = AutoTokenizer.from_pretrained(merged_dir).encode(probe["text"], add_special_tokens=False)
        print(f"lora check: the exported tokenizer gives {len(ids)} ids for the probe, Ferry {len(probe['ids'])}; "
              f"equal: {ids == probe['ids']}")
        if ids != probe["ids"]:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
