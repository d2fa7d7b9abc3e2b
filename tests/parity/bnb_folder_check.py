#!/usr/bin/env python3
"""Checks `ferry export` of a QLoRA run that started from a bitsandbytes 4-bit folder (called by
stages_qlora_bnb_folder_parity_test.cpp).

Usage: bnb_folder_check.py MERGED_DIR FERRY_LOGITS
  MERGED_DIR    Ferry's export (a plain Hugging Face folder: dequantised base + merged adapters);
                loaded with AutoModelForCausalLM.from_pretrained, fp32
  FERRY_LOGITS  safetensors with input_ids, attention_mask (B, T) and the logits (B, T, V) of
                Ferry's trained model (the 4-bit base + adapters, not merged)
Prints the largest difference on the tokens the mask keeps and exits 1 above 1e-4.
"""
import json
import pathlib
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

TOLERANCE = 1e-4


def main() -> int:
    merged_dir, logits_file = sys.argv[1:3]
    torch.set_num_threads(1)
    config = json.loads((pathlib.Path(merged_dir) / "config.json").read_text())
    if "quantization_config" in config:
        print("bnb folder check: the export still carries a quantization_config")
        return 1
    data = load_file(logits_file)
    model = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=data["input_ids"], attention_mask=data["attention_mask"]).logits
    error = (logits - data["logits"])[data["attention_mask"].bool()].abs().max().item()
    print(f"bnb folder check: max |transformers(export) - ferry| {error:.3g} (tolerance {TOLERANCE})")
    return 0 if error <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
