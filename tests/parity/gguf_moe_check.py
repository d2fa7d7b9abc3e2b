#!/usr/bin/env python3
"""Checks a GGUF file Ferry's export_gguf_model wrote from a gguf_moe_ref.py fixture (a tiny Mixture
of Experts) with the tools people will read it with; run by gguf_moe_parity_test.cpp.

  gguf_moe_check.py FIXTURE_DIR TYPE=FILE.gguf [TYPE=FILE.gguf ...]   (TYPE: f32, f16 or q8_0, the --gguf-type)

FIXTURE_DIR holds model/ (the exported Hugging Face folder) and logits.safetensors (its inputs). The
reference logits are transformers' (fp32) on the weights the file holds as gguf-py dequantises
them (gguf_moe_convert.dequantized_logits; at f32 the source's weights, so the fixture's logits):
on these tiny random models rounding the weights to f16 or q8_0 moves the logits by up to a third
of their scale (a token's top-2 experts change), so each tool is held to the file's own weights.
They are saved ("logits") beside each file as FILE.reference.safetensors, for Ferry's read of it.
Checks per file, against llama.cpp's converter as gguf_moe_convert.py restates it:
  1. general.architecture is the converter's (qwen3moe, qwen2moe, olmoe; Mixtral: llama) and every
     key the converter writes is there with its value (expert_count, expert_used_count,
     expert_feed_forward_length, expert_shared_feed_forward_length, ...; OLMoE's
     layer_norm_rms_epsilon excepted: the converter writes 1e-5 whatever the config says, Ferry the
     config's, and the fixture's is 1e-5);
  2. the tensors are the converter's: same names (each layer's experts stacked into ffn_*_exps),
     shapes, ggml types (routers F32, Q8_0 falling back to F16), and bytes: f32 and f16 equal to
     the converter's values, q8_0 equal to gguf-py's quantiser on them. One deliberate difference:
     Qwen2-MoE's shared expert gate is 1-D (hidden), as llama.cpp's loader declares it and
     transformers' GGUF loader needs it; today's converter writes (1, hidden), the same tensor to
     llama.cpp, on which transformers fails ("size mismatch ... [1, 1, 64]");
  3. llama.cpp (llama-cpp-python) loads the file and, on the fixture rows without padding, gives the
     reference logits within LLAMA_CPP_BOUND[TYPE] of the logit scale;
  4. where transformers' GGUF loader knows the architecture (qwen2moe, qwen3moe),
     from_pretrained(dir, gguf_file=...) reads the weights to the reference logits within 1e-4 of
     the scale. Its GGUF config reader drops expert_feed_forward_length (moe_intermediate_size falls
     back to the class default), so the source's config.json is passed as config=, and the keys it
     does read (expert_count, expert_used_count, sizes, heads) are compared with the source.
Prints what it checked and every difference; exit 1 if a check fails, 77 without llama_cpp.
"""
import pathlib
import sys
import tempfile

import numpy as np
import torch
from gguf import GGUFReader
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gguf_moe_convert import (ARCH, converter_keys, converter_tensors, converter_type, dequantized_logits,  # noqa: E402
                              hparams, quantized)

try:
    from llama_cpp import Llama
except ImportError:
    print("llama_cpp is not installed")
    sys.exit(77)

# llama.cpp against the reference, as a share of the largest |logit|. f32: as the dense families
# (gguf_family_export_check.py: 1e-3; measured <= 4e-6). f16 and q8_0: llama.cpp also rounds the
# activations for its dot products (to f16; to Q8_0 blocks), which these tiny random models amplify
# as the weight rounding above (a token's top-2 experts change): measured 2026-12-07 (qwen3_moe /
# qwen2_moe / mixtral / olmoe) f16 0.0010 / 0.0029 / 0.015 / 0.0029, q8_0 0.11 / 0.14 / 0.073 / 0.051
# of the scale (the argmax agreement is printed). Bounds about 2x: loose, a sanity check; the
# layout is held by 2. (bytes = the converter's) and the exact f32 comparison.
LLAMA_CPP_BOUND = {"f32": 1e-3, "f16": 3e-2, "q8_0": 0.25}
failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def field(reader, key):
    f = reader.get_field(key)
    return None if f is None else f.contents()


def positions(mask):
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def check_metadata(reader, config, arch):
    for key, value, kind in converter_keys(config):
        if arch == "olmoe" and key == "attention.layer_norm_rms_epsilon":
            continue
        got = field(reader, f"{arch}.{key}")
        want = float(np.float32(value)) if kind == "float32" else value
        if got is None or (float(np.float32(got)) if kind == "float32" else got) != want:
            fail(f"metadata {arch}.{key} is {got!r}; the converter writes {want!r}")
    print(f"metadata: the converter's {len(converter_keys(config))} {arch} keys, with its values")


def check_tensors(reader, expected, outtype):
    expected = {name: t.reshape(-1) if name.endswith(".ffn_gate_inp_shexp.weight") else t  # see 2. above
                for name, t in expected.items()}
    got = {t.name: t for t in reader.tensors}
    if set(got) != set(expected):
        fail(f"tensor names: only in the file {sorted(set(got) - set(expected))}, only the converter's "
             f"{sorted(set(expected) - set(got))}")
    types = {}
    for name in sorted(set(got) & set(expected)):
        tensor, want = got[name], expected[name]
        shape = tuple(int(d) for d in reversed(tensor.shape))
        if shape != tuple(want.shape):
            fail(f"{name}: shape {shape}, the converter's {tuple(want.shape)}")
            continue
        qtype = converter_type(name, want, outtype)
        types[qtype.name] = types.get(qtype.name, 0) + 1
        if tensor.tensor_type != qtype:
            fail(f"{name}: type {tensor.tensor_type.name}, the converter's {qtype.name}")
            continue
        mine = np.asarray(tensor.data).view(np.uint8).reshape(-1)
        theirs = np.ascontiguousarray(quantized(want, qtype)).view(np.uint8).reshape(-1)
        if mine.size != theirs.size or not np.array_equal(mine, theirs):
            fail(f"{name} ({qtype.name}): bytes differ from the converter's")
    stacks = sum(1 for name in got if "_exps." in name)
    print(f"{len(got)} tensors ({stacks} stacked expert tensors): the converter's names, shapes, types "
          f"({', '.join(f'{n} {t}' for t, n in sorted(types.items()))}) and bytes")


def check_llama_cpp(path, inputs, reference, outtype):
    mask = inputs["attention_mask"]
    rows = [r for r in range(mask.shape[0]) if bool(mask[r].all())]
    llm = Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False, n_threads=1, type_k=0, type_v=0)
    worst, kept, positions_seen = 0.0, 0, 0
    for r in rows:
        llm.reset()
        ids = inputs["input_ids"][r].tolist()
        llm.eval(ids)
        got = torch.tensor(np.array(llm.scores[:len(ids)]), dtype=torch.float32)
        worst = max(worst, float((got - reference[r]).abs().max()))
        kept += int((got.argmax(-1) == reference[r].argmax(-1)).sum())
        positions_seen += len(ids)
    llm.close()
    scale = float(reference.abs().max())
    bound = LLAMA_CPP_BOUND[outtype]
    print(f"llama.cpp logits on {len(rows)} unpadded row(s): max error {worst:.3g} = {worst / scale:.2g} of the "
          f"logit scale {scale:.3g} (bound {bound}), argmax = the reference's at {kept}/{positions_seen} positions")
    if not worst <= bound * scale:
        fail(f"llama.cpp: max error {worst:.3g} > {bound} x {scale:.3g}")


def check_transformers(path, source, arch, inputs, reference, outtype):
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES, load_gguf_checkpoint
    wanted = {"qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe"}.get(arch)
    if wanted is None or wanted not in GGUF_SUPPORTED_ARCHITECTURES:
        print(f"transformers: not compared: its GGUF loader has no {arch!r} with experts "
              f"({'a llama file is read as LlamaForCausalLM, without experts' if arch == 'llama' else 'unsupported'})")
        return
    config = AutoConfig.from_pretrained(source)
    parsed = load_gguf_checkpoint(str(path), return_tensors=False)["config"]
    for key in ("num_experts", "num_experts_per_tok", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "vocab_size"):
        if key in parsed and parsed[key] != getattr(config, key):
            fail(f"transformers reads {key}={parsed[key]!r} from the file; the source has {getattr(config, key)!r}")
    dropped = getattr(AutoConfig.for_model(**parsed), "moe_intermediate_size", None)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, config=config,
                                                 dtype=torch.float32).eval()
    mask = inputs["attention_mask"]
    with torch.no_grad():
        logits = model(input_ids=inputs["input_ids"], attention_mask=mask, position_ids=positions(mask)).logits
    error = float(((logits - reference).abs() * mask.bool().unsqueeze(-1)).max())
    scale = float(reference.abs().max())
    bound = 1e-4
    print(f"transformers gguf_file= ({type(model).__name__}, config= the source's: its reader makes "
          f"moe_intermediate_size {dropped} of the file, not {config.moe_intermediate_size}): max error {error:.3g} "
          f"(logit scale {scale:.3g}, bound {bound} x scale)")
    if not error <= bound * scale:
        fail(f"transformers gguf_file=: max error {error:.3g} > {bound} x {scale:.3g}")


def check_file(path, fixture, outtype):
    source = fixture / "model"
    config = hparams(source)
    inputs = load_file(str(fixture / "logits.safetensors"))
    with tempfile.TemporaryDirectory() as folder:
        reference = dequantized_logits(source, path, pathlib.Path(folder) / "dequantized", inputs).float()
    save_file({"logits": reference.contiguous()}, str(path.parent / (path.name + ".reference.safetensors")))
    reader = GGUFReader(path)
    arch = field(reader, "general.architecture")
    want = ARCH[config["model_type"]]
    moved = float((reference - inputs["logits"]).abs().max())
    print(f"{path.name}: general.architecture {arch!r} (converter: {want!r}), type {outtype}; reference: "
          f"transformers on the file's weights (logits moved by {outtype} rounding: up to {moved:.3g})")
    if arch != want:
        fail(f"general.architecture is {arch!r}; the converter writes {want!r}")
        return
    check_metadata(reader, config, arch)
    check_tensors(reader, converter_tensors(source, config), outtype)
    check_llama_cpp(path, inputs, reference, outtype)
    check_transformers(path, source, arch, inputs, reference, outtype)


def main(argv):
    fixture = pathlib.Path(argv[0])
    torch.set_num_threads(1)
    for argument in argv[1:]:
        outtype, path = argument.split("=", 1)
        check_file(pathlib.Path(path), fixture, outtype)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
