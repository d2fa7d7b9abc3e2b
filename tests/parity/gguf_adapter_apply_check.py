#!/usr/bin/env python3
"""A GGUF LoRA adapter applied as llama.cpp applies it gives the merged model.

llama.cpp (llama-adapter.cpp, llm_graph_context::build_lora_mm) pairs `<name>.lora_a` /
`<name>.lora_b` with the base tensor `<name>`, checks base ne[0] == lora_a ne[0], base ne[1] ==
lora_b ne[1] and lora_a ne[1] == lora_b ne[0], and computes W x + scale * B (A x) with
scale = adapter.lora.alpha / rank (rank = lora_b's ne[0], float32). This script redoes that on the
weights with NumPy: every base tensor of BASE.gguf (`ferry export --format gguf --lora none`, or the
run's base model exported) plus scale * B @ A (float64) must equal the same tensor of MERGED.gguf
(`ferry export --format gguf`, LoRA merged by Ferry) within --tolerance (absolute), and every tensor
without an adapter must be equal bit for bit. The adapter's general.architecture must be the base's,
its general.type "adapter" and adapter.type "lora". Tensors of every file are dequantised with
gguf-py's gguf.quants.dequantize.

Usage: gguf_adapter_apply_check.py BASE.gguf ADAPTER.gguf MERGED.gguf [--tolerance 1e-6]
Prints the largest difference; exit 1 on any mismatch.
"""
import argparse
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def tensors_of(reader):
    return {t.name: t for t in reader.tensors}


def values(t):
    """The tensor as float64 in torch order (outermost first)."""
    return dequantize(t.data, t.tensor_type).astype(np.float64).reshape([int(d) for d in reversed(t.shape)])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("adapter")
    parser.add_argument("merged")
    parser.add_argument("--tolerance", type=float, default=1e-6)
    args = parser.parse_args()
    base_reader, adapter_reader, merged_reader = GGUFReader(args.base), GGUFReader(args.adapter), GGUFReader(args.merged)
    errors = []

    def meta(reader, key):
        field = reader.fields.get(key)
        return None if field is None else field.contents()

    if meta(adapter_reader, "general.architecture") != meta(base_reader, "general.architecture"):
        errors.append("the adapter's general.architecture is not the base's (llama.cpp: 'model arch and LoRA arch "
                      "mismatch')")
    if meta(adapter_reader, "general.type") != "adapter" or meta(adapter_reader, "adapter.type") != "lora":
        errors.append("general.type / adapter.type are not adapter / lora")
    alpha = np.float32(meta(adapter_reader, "adapter.lora.alpha"))

    base, adapter, merged = tensors_of(base_reader), tensors_of(adapter_reader), tensors_of(merged_reader)
    pairs = {}
    for name in adapter:
        for suffix in (".lora_a", ".lora_b"):
            if name.endswith(suffix):
                pairs.setdefault(name[: -len(suffix)], {})[suffix] = adapter[name]
                break
        else:
            errors.append(f"adapter tensor {name}: neither .lora_a nor .lora_b (llama.cpp: unexpected suffix)")
    if set(base) != set(merged):
        errors.append(f"base and merged files hold different tensors: {sorted(set(base) ^ set(merged))}")
    worst, worst_name = 0.0, None
    for name, pair in sorted(pairs.items()):
        if name not in base:
            errors.append(f"adapter pair {name}: no such tensor in the base model")
            continue
        a, b, w = pair.get(".lora_a"), pair.get(".lora_b"), base[name]
        if a is None or b is None:
            errors.append(f"adapter pair {name}: one of lora_a / lora_b is missing")
            continue
        if not (int(w.shape[0]) == int(a.shape[0]) and int(w.shape[1]) == int(b.shape[1])
                and int(a.shape[1]) == int(b.shape[0])):
            errors.append(f"adapter pair {name}: ne a {list(a.shape)}, b {list(b.shape)} do not fit base "
                          f"{list(w.shape)}")
            continue
        rank = np.float32(int(b.shape[0]))
        scale = float(alpha / rank)  # llama_adapter_lora_weight::get_scale, in float32
        applied = values(w) + scale * (values(b) @ values(a))  # (out, rank) @ (rank, in)
        diff = float(np.abs(applied - values(merged[name])).max())
        if diff > worst:
            worst, worst_name = diff, name
        if not diff <= args.tolerance:
            errors.append(f"{name}: base + scale * B @ A differs from the merged weight by {diff:.3g}")
    for name in sorted(set(base) & set(merged)):
        if name in pairs:
            continue
        if np.ascontiguousarray(base[name].data).tobytes() != np.ascontiguousarray(merged[name].data).tobytes():
            errors.append(f"{name}: no adapter, but base and merged files differ")
    print(f"{len(pairs)} adapted tensors (alpha {float(alpha)}): max |base + scale * B @ A - merged| = {worst:.3g}"
          f"{' at ' + worst_name if worst_name else ''}; {len(set(base) - set(pairs))} other tensors compared exactly")
    if not pairs:
        errors.append("the adapter holds no lora_a / lora_b pairs")
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
