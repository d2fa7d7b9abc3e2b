#!/usr/bin/env python3
"""Checks files that Ferry wrote, using the Python `safetensors` and `transformers` packages.
Called by tests/parity/io_safetensors_parity_test.cpp and tests/integration/io_export_test.cpp;
exits non-zero (with a message) on any difference.

  file ORIGINAL COPY              COPY (written by Ferry) holds exactly ORIGINAL's tensors and
                                  metadata; its header is 8-byte aligned and says format "pt"
  model ORIGINAL_DIR COPY_DIR [--shards N]
                                  transformers loads both folders; identical weights and logits;
                                  COPY_DIR has N shards + index (N=1: model.safetensors only)
  configs DIR                     every DIR/<case>/config.json loads with AutoConfig and has the
                                  values in DIR/<case>/expected.json; tiny ones build a model
                                  (which projections have biases; q_norm/k_norm when qk_norm)
"""
import json
import pathlib
import struct
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file

failures = []


def fail(message: str) -> None:
    failures.append(message)
    print("MISMATCH: " + message, file=sys.stderr)


def same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)) if a.numel() else True


def check_file(original: str, copy: str) -> None:
    a, b = load_file(original), load_file(copy)
    if sorted(a) != sorted(b):
        fail(f"tensor names differ: {sorted(a)} vs {sorted(b)}")
    for name in a:
        if name in b and not same_tensor(a[name], b[name]):
            fail(f"tensor {name}: {a[name].dtype}{list(a[name].shape)} vs {b[name].dtype}{list(b[name].shape)} or values differ")
    with open(copy, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    if (8 + header_len) % 8:
        fail(f"header length {header_len} leaves the data section unaligned")
    with safe_open(original, "pt") as f:
        original_meta = f.metadata() or {}
    meta = header.get("__metadata__", {})
    if meta.get("format") != "pt":
        fail(f"metadata format is {meta.get('format')!r}, not 'pt'")
    for key, value in original_meta.items():
        if meta.get(key) != value:
            fail(f"metadata {key!r}: {meta.get(key)!r} != {value!r}")
    names = [k for k in header if k != "__metadata__"]
    offsets = [header[k]["data_offsets"][0] for k in sorted(names)]
    if offsets != sorted(offsets):
        fail("tensors are not stored in name order")


def check_model(original: str, copy: str, shards: int) -> None:
    from transformers import AutoModelForCausalLM

    copy_dir = pathlib.Path(copy)
    if shards == 1:
        if not (copy_dir / "model.safetensors").exists() or (copy_dir / "model.safetensors.index.json").exists():
            fail("expected a single model.safetensors and no index")
    else:
        files = sorted(p.name for p in copy_dir.glob("model-*-of-*.safetensors"))
        expected = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
        if files != expected:
            fail(f"shards {files}, expected {expected}")
        index = json.loads((copy_dir / "model.safetensors.index.json").read_text())
        total = sum(t.numel() * t.element_size() for f in files for t in load_file(copy_dir / f).values())
        if index["metadata"]["total_size"] != total:
            fail(f"index total_size {index['metadata']['total_size']} != {total}")
        if (copy_dir / "model.safetensors").exists():
            fail("a stale model.safetensors sits next to the shards")
    a = AutoModelForCausalLM.from_pretrained(original).eval()
    b = AutoModelForCausalLM.from_pretrained(copy).eval()
    if type(a) is not type(b):
        fail(f"model classes differ: {type(a).__name__} vs {type(b).__name__}")
    sa, sb = a.state_dict(), b.state_dict()
    for name, t in sa.items():
        if name not in sb or not same_tensor(t, sb[name]):
            fail(f"weight {name} differs after loading the copy")
    for key in ("model_type", "vocab_size", "hidden_size", "num_key_value_heads", "head_dim", "tie_word_embeddings",
                "rope_parameters", "eos_token_id", "bos_token_id", "pad_token_id", "attention_bias", "sliding_window"):
        if getattr(a.config, key, None) != getattr(b.config, key, None):
            fail(f"config.{key}: {getattr(a.config, key, None)!r} vs {getattr(b.config, key, None)!r}")
    ids = torch.tensor([[1, 5, 9, 17, 33, 4, 2, 60], [3, 3, 8, 40, 11, 0, 7, 21]]) % a.config.vocab_size
    with torch.no_grad():
        la, lb = a(ids).logits, b(ids).logits
    if not torch.equal(la, lb):
        fail(f"logits differ, max abs diff {(la - lb).abs().max().item()}")


def check_configs(folder: str) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    cases = sorted(p for p in pathlib.Path(folder).iterdir() if p.is_dir())
    if not cases:
        fail("no config cases")
    for case in cases:
        expected = json.loads((case / "expected.json").read_text())
        c = AutoConfig.from_pretrained(case)
        got = {
            "architectures": c.architectures, "model_type": c.model_type, "vocab_size": c.vocab_size,
            "hidden_size": c.hidden_size, "intermediate_size": c.intermediate_size,
            "num_hidden_layers": c.num_hidden_layers, "num_attention_heads": c.num_attention_heads,
            "num_key_value_heads": c.num_key_value_heads, "head_dim": getattr(c, "head_dim", None),
            "max_position_embeddings": c.max_position_embeddings, "rms_norm_eps": c.rms_norm_eps,
            "rope_parameters": c.rope_parameters, "tie_word_embeddings": c.tie_word_embeddings,
            "attention_bias": getattr(c, "attention_bias", None), "mlp_bias": getattr(c, "mlp_bias", None),
            "sliding_window": getattr(c, "sliding_window", None),
            "bos_token_id": c.bos_token_id, "eos_token_id": c.eos_token_id, "pad_token_id": c.pad_token_id,
            "dtype": str(c.dtype).replace("torch.", "") if c.dtype is not None else None,
        }
        for key, value in expected.items():
            if key in ("biases", "qk_norm"):
                continue
            if got.get(key) != value:
                fail(f"{case.name}: {key} = {got.get(key)!r}, expected {value!r}")
        if "biases" in expected:  # build the model: which projections have a bias
            model = AutoModelForCausalLM.from_config(c)
            attn = model.model.layers[0].self_attn
            mlp = model.model.layers[0].mlp
            biases = {"q": attn.q_proj.bias is not None, "o": attn.o_proj.bias is not None,
                      "mlp": mlp.up_proj.bias is not None}
            if biases != expected["biases"]:
                fail(f"{case.name}: biases {biases}, expected {expected['biases']}")
            if "qk_norm" in expected and hasattr(attn, "q_norm") != expected["qk_norm"]:
                fail(f"{case.name}: q/k norms {hasattr(attn, 'q_norm')}, expected {expected['qk_norm']}")
            if attn.q_proj.weight.shape[0] != c.num_attention_heads * expected["head_dim"]:
                fail(f"{case.name}: q_proj has {attn.q_proj.weight.shape[0]} outputs")


def main() -> int:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "file":
        check_file(args[0], args[1])
    elif mode == "model":
        shards = int(args[3]) if len(args) > 3 and args[2] == "--shards" else 1
        check_model(args[0], args[1], shards)
    elif mode == "configs":
        check_configs(args[0])
    else:
        print(f"unknown mode {mode}", file=sys.stderr)
        return 2
    if failures:
        print(f"{len(failures)} mismatch(es)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
