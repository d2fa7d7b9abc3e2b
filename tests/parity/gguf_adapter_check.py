#!/usr/bin/env python3
"""Checks a GGUF LoRA adapter written by `ferry export --format gguf --lora adapter` against the same
run's PEFT adapter (`ferry export --format hf --lora adapter`), converted here independently with
the rules of llama.cpp's convert_lora_to_gguf.py (read from llama.cpp's source: the LoraModel class
of that script, LlamaModel.modify_tensors / LlamaModel.permute in conversion/llama.py, and
ModelBase.prepare_tensors' type rules in conversion/base.py), read back with gguf-py's GGUFReader:

  - metadata, every key in the converter's order with its GGUF value type and value: general.
    architecture, general.type "adapter", adapter.type "lora", general.name, adapter.lora.alpha
    (float32 of adapter_config.json's lora_alpha), general.quantization_version 2 — none missing,
    none extra;
  - tensors: for every lora_A / lora_B pair of adapter_model.safetensors, `<base GGUF name>.lora_a`
    and `.lora_b` (the name from gguf-py's TensorNameMap, as the converter names the base weight),
    lora_A as it is (rank, in) and lora_B (out, rank) with, for the llama architecture, q_proj's rows
    permuted with n_head groups and k_proj's with n_kv_head groups (LlamaModel.permute); bf16 sources
    as float32; the ggml type by --outtype (f32: F32; f16 / bf16: F16 / BF16; q8_0: Q8_0, or F16 when
    a row is not a multiple of 32 values, the converter's QuantError fallback); bytes from gguf-py's
    own gguf.quants.quantize; compared bit for bit with Ferry's file.

With --converter PATH/convert_lora_to_gguf.py (llama.cpp's script: scripts/deps.sh copies it from
the llama-cpp-python sdist's vendor/llama.cpp into <deps venv>/share/llama.cpp), the script itself
also converts the PEFT folder (--base BASE_DIR) and every metadata value (general.name aside: the
converter derives it from the folder's name) and every tensor of its file must equal Ferry's, bit
for bit.

Usage: gguf_adapter_check.py PEFT_DIR BASE_DIR ADAPTER.gguf --type f16 --arch llama --name NAME
                             [--converter convert_lora_to_gguf.py]
BASE_DIR holds the base model's config.json. Prints every difference; exit 1 if there is one.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType as V
from gguf.quants import quantize
from safetensors.torch import load_file

MATRIX_TYPES = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}
ARCHS = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}


def base_tensor_name(peft_name):
    """convert_lora_to_gguf.py's get_base_tensor_name (embedding pairs are never in Ferry's adapters)."""
    name = peft_name.replace("base_model.model.", "")
    return name.replace(".lora_A.weight", ".weight").replace(".lora_B.weight", ".weight")


def gguf_name(name, arch, n_layers):
    mapped = gguf.get_tensor_name_map(ARCHS[arch], n_layers).get_type_and_name(name, try_suffixes=(".weight", ".bias"))
    assert mapped is not None, f"gguf-py has no name for {name}"
    tensor_type, new_name = mapped
    assert tensor_type in gguf.MODEL_TENSORS[ARCHS[arch]], f"{arch} has no {new_name}"
    return new_name


def permute(weights, n_head, n_head_kv):
    """LlamaModel.permute, applied by the converter to lora_B of q_proj / k_proj (LoraTorchTensor)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def expected_metadata(arch, name, alpha):
    return [
        ("general.architecture", (V.STRING, arch)),
        ("general.type", (V.STRING, "adapter")),
        ("adapter.type", (V.STRING, "lora")),
        ("general.name", (V.STRING, name)),
        ("adapter.lora.alpha", (V.FLOAT32, float(np.float32(alpha)))),
        ("general.quantization_version", (V.UINT32, 2)),
    ]


def expected_tensors(peft_dir, config, arch):
    """{gguf name: float tensor (torch order)}."""
    weights = load_file(peft_dir / "adapter_model.safetensors")
    n_head = config["num_attention_heads"]
    n_kv = config.get("num_key_value_heads", n_head)
    out = {}
    for peft_name, tensor in weights.items():
        assert ".lora_A.weight" in peft_name or ".lora_B.weight" in peft_name, peft_name
        base = base_tensor_name(peft_name)
        if tensor.dtype not in (torch.float16, torch.float32):
            tensor = tensor.to(torch.float32)  # prepare_tensors: unsupported dtypes become float32
        is_b = ".lora_B.weight" in peft_name
        if arch == "llama" and is_b and base.endswith("q_proj.weight"):
            tensor = permute(tensor, n_head, n_head)
        if arch == "llama" and is_b and base.endswith("k_proj.weight"):
            tensor = permute(tensor, n_head, n_kv)
        out[gguf_name(base, arch, config["num_hidden_layers"]) + (".lora_b" if is_b else ".lora_a")] = tensor
    return out


def quantized(tensor, outtype):
    """(ggml type, bytes) as prepare_tensors writes a 2-D lora tensor."""
    qtype = MATRIX_TYPES[outtype]
    data = tensor.numpy()
    try:
        return qtype, np.ascontiguousarray(quantize(data, qtype)).tobytes()
    except gguf.QuantError:
        return Q.F16, np.ascontiguousarray(quantize(data, Q.F16)).tobytes()


def field_value(field):
    main = field.types[0]
    if main == V.ARRAY:
        return field.types[-1], list(field.contents())
    return main, field.contents()


def metadata_of(reader):
    return [(k, field_value(f)) for k, f in reader.fields.items() if not k.startswith("GGUF.")]


def compare_metadata(actual, expected, errors, what, skip=()):
    a = [(k, v) for k, v in actual if k not in skip]
    e = [(k, v) for k, v in expected if k not in skip]
    if [k for k, _ in a] != [k for k, _ in e]:
        errors.append(f"{what}: metadata keys {[k for k, _ in a]}, expected {[k for k, _ in e]}")
    expected_by_key = dict(e)
    for key, value in a:
        if key in expected_by_key and value != expected_by_key[key]:
            errors.append(f"{what}: metadata {key} = {value}, expected {expected_by_key[key]}")


def run_converter(converter, peft_dir, base_dir, outtype, errors):
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "converted.gguf"
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run([sys.executable, str(converter), "--base", str(base_dir), "--outtype", outtype,
                            "--outfile", str(out), str(peft_dir)], capture_output=True, text=True, env=env)
        if r.returncode != 0 or not out.is_file():
            errors.append(f"convert_lora_to_gguf.py failed ({r.returncode}): {r.stderr[-2000:]}")
            return None, None
        reader = GGUFReader(out)
        tensors = {t.name: (t.tensor_type, [int(d) for d in t.shape], np.ascontiguousarray(t.data).tobytes())
                   for t in reader.tensors}
        return metadata_of(reader), tensors


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("peft_dir", type=pathlib.Path)
    parser.add_argument("base_dir", type=pathlib.Path)
    parser.add_argument("gguf", type=pathlib.Path)
    parser.add_argument("--type", required=True, choices=sorted(MATRIX_TYPES))
    parser.add_argument("--arch", required=True, choices=sorted(ARCHS))
    parser.add_argument("--name", required=True)
    parser.add_argument("--converter", type=pathlib.Path)
    args = parser.parse_args()

    config = json.loads((args.base_dir / "config.json").read_text())
    adapter_config = json.loads((args.peft_dir / "adapter_config.json").read_text())
    reader = GGUFReader(args.gguf)
    errors = []
    if reader.fields["GGUF.version"].contents() != 3:
        errors.append(f"GGUF version {reader.fields['GGUF.version'].contents()}, expected 3")
    actual_meta = metadata_of(reader)
    compare_metadata(actual_meta, expected_metadata(args.arch, args.name, adapter_config["lora_alpha"]), errors,
                     "Ferry vs the rules")

    written = {t.name: (t.tensor_type, [int(d) for d in t.shape], np.ascontiguousarray(t.data).tobytes())
               for t in reader.tensors}
    tensors = expected_tensors(args.peft_dir, config, args.arch)
    for name in sorted(set(tensors) | set(written)):
        if name not in written:
            errors.append(f"tensor {name}: missing")
            continue
        if name not in tensors:
            errors.append(f"tensor {name}: not expected")
            continue
        qtype, want = quantized(tensors[name], args.type)
        got_type, shape, got = written[name]
        if got_type != qtype:
            errors.append(f"tensor {name}: type {got_type.name}, expected {qtype.name}")
        elif shape != list(reversed(tensors[name].shape)):
            errors.append(f"tensor {name}: ggml shape {shape}, expected {list(reversed(tensors[name].shape))}")
        elif got != want:
            errors.append(f"tensor {name}: bytes differ ({len(got)} vs {len(want)} bytes)")
    types = sorted({written[n][0].name for n in written})
    print(f"checked {len(actual_meta)} metadata keys and {len(written)} tensors ({', '.join(types)}) of {args.gguf} "
          f"against the converter's rules")

    if args.converter is not None:
        meta, converted = run_converter(args.converter, args.peft_dir, args.base_dir, args.type, errors)
        if converted is not None:
            compare_metadata(actual_meta, meta, errors, "Ferry vs convert_lora_to_gguf.py", skip=("general.name",))
            if set(converted) != set(written):
                errors.append(f"convert_lora_to_gguf.py wrote tensors {sorted(set(converted) ^ set(written))} "
                              "that Ferry did not, or the reverse")
            for name in sorted(set(converted) & set(written)):
                if converted[name] != written[name]:
                    errors.append(f"tensor {name}: convert_lora_to_gguf.py wrote {converted[name][0].name} "
                                  f"{converted[name][1]}, Ferry {written[name][0].name} {written[name][1]}"
                                  + ("" if converted[name][:2] != written[name][:2] else ", bytes differ"))
            print(f"convert_lora_to_gguf.py ({args.converter}) wrote {len(converted)} tensors: "
                  f"{'the same metadata and tensors' if not errors else 'see the differences'}")
    for e in errors:
        print(e)
    print("OK" if not errors else f"{len(errors)} differences")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
