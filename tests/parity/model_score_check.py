#!/usr/bin/env python3
"""Checks a reward-model folder that Ferry wrote (save_pretrained of a LlamaForScore, or `ferry
export` of a score model) with transformers. Called by tests/parity/model_score_export_parity_test.cpp;
exits non-zero (with a message) on any difference.

  model_score_check.py MODEL_DIR EXPECTED.safetensors ARCHITECTURE

MODEL_DIR/config.json must name ARCHITECTURE (LlamaForSequenceClassification,
Qwen2ForSequenceClassification, Qwen3ForSequenceClassification or MistralForSequenceClassification),
one label as transformers writes it (id2label {"0": "LABEL_0"}, label2id {"LABEL_0": 0}) and a
pad_token_id; AutoModelForSequenceClassification must build that
class from the folder, and its scores for EXPECTED's input_ids / attention_mask (a padded batch:
(B, T) int64) must equal EXPECTED's `scores` (B) within 1e-4. Position ids are derived from the
mask as Ferry does (transformers' forward would number left padding too).
"""
import json
import pathlib
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForSequenceClassification

TOLERANCE = 1e-4


def main() -> int:
    folder, expected_file, architecture = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    failures = []
    raw = json.loads((folder / "config.json").read_text())
    if raw.get("architectures") != [architecture]:
        failures.append(f"architectures {raw.get('architectures')}, expected [{architecture!r}]")
    if raw.get("id2label") != {"0": "LABEL_0"} or raw.get("label2id") != {"LABEL_0": 0}:
        failures.append(f"id2label {raw.get('id2label')} / label2id {raw.get('label2id')}, expected one LABEL_0")
    config = AutoConfig.from_pretrained(folder)
    if config.num_labels != 1:
        failures.append(f"num_labels {config.num_labels}, expected 1")
    if config.pad_token_id is None:
        failures.append("pad_token_id is missing: transformers cannot score a padded batch")

    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()
    if type(model).__name__ != architecture:
        failures.append(f"AutoModelForSequenceClassification built {type(model).__name__}, expected {architecture}")
    expected = load_file(expected_file)
    ids, mask = expected["input_ids"], expected["attention_mask"]
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
    with torch.no_grad():
        scores = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits.squeeze(-1).float()
    error = (scores - expected["scores"].float()).abs().max().item()
    print(f"{architecture}: transformers {scores.tolist()} vs expected {expected['scores'].tolist()}, max error {error:.2e}")
    if scores.shape != expected["scores"].shape or not error <= TOLERANCE:
        failures.append(f"scores differ by {error} (> {TOLERANCE})")
    for failure in failures:
        print("MISMATCH: " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
