#!/usr/bin/env python3
"""Checks a GGUF file written by `ferry export --format gguf` against its source model folder, with
gguf-py's GGUFReader (the reader llama.cpp's own tools use) and an independent Python
implementation of the conversion documented in src/io/gguf_export.h and src/io/gguf_tokenizer.h:

  - every metadata key, its GGUF value type and value (no key missing, none extra);
  - every tensor: name (from gguf-py's TensorNameMap, as the converter names it), shape, ggml type
    and bytes, computed here from the safetensors with torch
    (LoRA merged as W + alpha / r * B @ A in fp32, llama's q/k rows permuted as llama.cpp's
    LlamaModel.permute, llama3 rope factors as LlamaModel.generate_extra_tensors) and converted
    with gguf-py's own gguf.quants.quantize (F16, BF16, Q8_0);
  - the vocabulary from the sentencepiece library (tokenizer.model) or the tokenizers library
    (tokenizer.json), special ids from tokenizer_config.json / config.json.

Usage: gguf_export_check.py MODEL_DIR FILE.gguf --type f16 --arch llama --pre default --name NAME
Prints every difference and exits 1 if there is one.
"""
import argparse
import json
import math
import pathlib
import sys

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType as V
from gguf import Keys as K
from gguf.quants import quantize
from safetensors.torch import load_file

FILE_TYPES = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}
MATRIX_TYPES = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def looks_special(text):
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (text.startswith("<|") and text.endswith("|>"))
            or (text.startswith("<｜") and text.endswith("｜>")) or (text.startswith("<unused") and text.endswith(">")))


def load_json(path):
    return json.loads(path.read_text()) if path.is_file() else None


# --- metadata ----------------------------------------------------------------------------------

def rope_settings(config):
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    theta = rope.get("rope_theta", config.get("rope_theta", 10000.0))
    return rope, theta


def model_metadata(config, arch, ftype, name):
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    rope, theta = rope_settings(config)
    f32 = lambda v: (V.FLOAT32, float(np.float32(v)))  # noqa: E731
    u32 = lambda v: (V.UINT32, int(v))  # noqa: E731
    meta = {
        K.General.ARCHITECTURE: (V.STRING, arch),
        K.General.TYPE: (V.STRING, "model"),
        K.General.NAME: (V.STRING, name),
        K.General.ALIGNMENT: u32(32),
        K.General.FILE_TYPE: u32(FILE_TYPES[ftype]),
        K.General.QUANTIZATION_VERSION: u32(2),
        K.LLM.CONTEXT_LENGTH.format(arch=arch): u32(config["max_position_embeddings"]),
        K.LLM.EMBEDDING_LENGTH.format(arch=arch): u32(config["hidden_size"]),
        K.LLM.BLOCK_COUNT.format(arch=arch): u32(config["num_hidden_layers"]),
        K.LLM.FEED_FORWARD_LENGTH.format(arch=arch): u32(config["intermediate_size"]),
        K.Attention.HEAD_COUNT.format(arch=arch): u32(config["num_attention_heads"]),
        K.Attention.HEAD_COUNT_KV.format(arch=arch): u32(config.get("num_key_value_heads", config["num_attention_heads"])),
        K.Attention.LAYERNORM_RMS_EPS.format(arch=arch): f32(config.get("rms_norm_eps", 1e-6)),
        K.Rope.FREQ_BASE.format(arch=arch): f32(theta),
        K.Rope.DIMENSION_COUNT.format(arch=arch): u32(head_dim),
        K.LLM.VOCAB_SIZE.format(arch=arch): u32(config["vocab_size"]),
    }
    if config.get("head_dim") is not None:
        meta[K.Attention.KEY_LENGTH.format(arch=arch)] = u32(head_dim)
        meta[K.Attention.VALUE_LENGTH.format(arch=arch)] = u32(head_dim)
    if rope.get("rope_type", rope.get("type")) == "linear":
        meta[K.Rope.SCALING_TYPE.format(arch=arch)] = (V.STRING, "linear")
        meta[K.Rope.SCALING_FACTOR.format(arch=arch)] = f32(rope["factor"])
    return meta


# --- vocabulary --------------------------------------------------------------------------------

def sentencepiece_vocab(model_dir, n_vocab, tokenizer_config):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    sp = spm.SentencePieceProcessor(model_file=str(model_dir / "tokenizer.model"))
    proto = pb.ModelProto()
    proto.ParseFromString((model_dir / "tokenizer.model").read_bytes())
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    scores = [-10000.0] * n_vocab
    types = [UNUSED] * n_vocab
    for i in range(sp.vocab_size()):
        tokens[i] = sp.IdToPiece(i)
        scores[i] = sp.GetScore(i)
        if sp.IsUnknown(i):
            types[i] = UNKNOWN
        elif sp.IsControl(i):
            types[i] = CONTROL
        elif sp.IsUnused(i):
            types[i] = UNUSED
        elif sp.IsByte(i):
            types[i] = BYTE
        elif proto.pieces[i].type == pb.ModelProto.SentencePiece.USER_DEFINED:
            types[i] = USER_DEFINED  # Ferry keeps these (the converter writes NORMAL); see gguf_tokenizer.h
        else:
            types[i] = NORMAL
    for text, i in (load_json(model_dir / "added_tokens.json") or {}).items():
        tokens[i], scores[i], types[i] = text, -1000.0, USER_DEFINED
    for key, data in (tokenizer_config or {}).get("added_tokens_decoder", {}).items():
        i, text = int(key), data["content"]
        if data.get("special") or looks_special(text):
            tokens[i], types[i] = text, CONTROL
        else:
            tokens[i], types[i] = text.replace("\u2581", " "), USER_DEFINED
        scores[i] = -1000.0
    own = {"unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id(), "pad": sp.pad_id()}
    find = lambda text: next((i for i, t in enumerate(tokens) if t == text), None)  # noqa: E731
    ids = special_ids(model_dir, tokenizer_config, n_vocab, find)
    for kind, i in own.items():
        if kind not in ids and 0 <= i < sp.vocab_size():
            ids[kind] = i
    add_bos = (tokenizer_config or {}).get("add_bos_token", True)
    add_eos = (tokenizer_config or {}).get("add_eos_token", False)
    meta = {
        K.Tokenizer.MODEL: (V.STRING, "llama"),
        K.Tokenizer.PRE: (V.STRING, "default"),
        K.Tokenizer.LIST: (V.STRING, tokens),
        K.Tokenizer.SCORES: (V.FLOAT32, [float(np.float32(s)) for s in scores]),
        K.Tokenizer.TOKEN_TYPE: (V.INT32, types),
        K.Tokenizer.ADD_PREFIX: (V.BOOL, bool(proto.normalizer_spec.add_dummy_prefix)),
    }
    return meta, ids, add_bos, add_eos


def bpe_vocab(model_dir, n_vocab, tokenizer_config, pre):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    data = json.loads((model_dir / "tokenizer.json").read_text())
    by_id = {i: t for t, i in tok.get_vocab(with_added_tokens=True).items()}
    added = tok.get_added_tokens_decoder()  # id -> AddedToken
    tokens, types = [], []
    for i in range(n_vocab):
        if i in added:
            text = added[i].content
            if added[i].special or looks_special(text):
                tokens.append(text)
                types.append(CONTROL)
            else:
                tokens.append(text.replace("\u2581", " "))
                types.append(USER_DEFINED)
        elif i in by_id:
            tokens.append(by_id[i])
            types.append(NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
    merges = []
    for m in data["model"]["merges"]:
        merges.append(m if isinstance(m, str) else " ".join(p.replace(" ", "\u0120") for p in m))
    contents = {}
    for i in sorted(added):
        contents.setdefault(added[i].content, i)
    ids = special_ids(model_dir, tokenizer_config, n_vocab, contents.get)
    add_bos = (tokenizer_config or {}).get("add_bos_token")
    add_eos = (tokenizer_config or {}).get("add_eos_token")
    # A TemplateProcessing post-processor that puts BOS first / EOS last (gguf-py's SpecialVocab).
    template_bos = template_eos = False
    post = data.get("post_processor") or {}
    for proc in post.get("processors", [post]):
        single = proc.get("single", []) if proc.get("type") == "TemplateProcessing" else []
        if len(single) > 1:
            first = single[0].get("SpecialToken", {}).get("id")
            last = single[-1].get("SpecialToken", {}).get("id")
            if first:
                template_bos = "bos" in ids and first == tokens[ids["bos"]]
            if last:
                template_eos = "eos" in ids and last == tokens[ids["eos"]]
    meta = {
        K.Tokenizer.MODEL: (V.STRING, "gpt2"),
        K.Tokenizer.PRE: (V.STRING, pre),
        K.Tokenizer.LIST: (V.STRING, tokens),
        K.Tokenizer.TOKEN_TYPE: (V.INT32, types),
        K.Tokenizer.MERGES: (V.STRING, merges),
    }
    return meta, ids, template_bos if add_bos is None else add_bos, template_eos if add_eos is None else add_eos


def special_ids(model_dir, tokenizer_config, n_vocab, find):
    ids = {}
    for kind in ("bos", "eos", "unk", "pad"):
        entry = (tokenizer_config or {}).get(f"{kind}_token")
        text = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(text, str) and find(text) is not None:
            ids[kind] = find(text)
    config = load_json(model_dir / "config.json")
    for kind in ("bos", "eos", "unk", "pad"):
        value = config.get(f"{kind}_token_id")
        if isinstance(value, list):
            value = value[0] if value else None
        if kind not in ids and isinstance(value, int):
            assert 0 <= value < n_vocab
            ids[kind] = value
    return ids


def vocab_metadata(model_dir, n_vocab, pre):
    tokenizer_config = load_json(model_dir / "tokenizer_config.json")
    if (model_dir / "tokenizer.model").is_file():
        meta, ids, add_bos, add_eos = sentencepiece_vocab(model_dir, n_vocab, tokenizer_config)
    else:
        meta, ids, add_bos, add_eos = bpe_vocab(model_dir, n_vocab, tokenizer_config, pre)
    keys = {"bos": K.Tokenizer.BOS_ID, "eos": K.Tokenizer.EOS_ID, "unk": K.Tokenizer.UNK_ID, "pad": K.Tokenizer.PAD_ID}
    for kind, i in ids.items():
        meta[keys[kind]] = (V.UINT32, i)
    meta[K.Tokenizer.ADD_BOS] = (V.BOOL, bool(add_bos))
    meta[K.Tokenizer.ADD_EOS] = (V.BOOL, bool(add_eos))
    template = (tokenizer_config or {}).get("chat_template")
    if template is None and (model_dir / "chat_template.jinja").is_file():
        template = (model_dir / "chat_template.jinja").read_text()
    if template:
        meta[K.Tokenizer.CHAT_TEMPLATE] = (V.STRING, template)
    return meta


# --- tensors -----------------------------------------------------------------------------------

def permute(weights, n_head, n_head_kv):
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def llama3_rope_factors(config):
    """llama.cpp convert_hf_to_gguf.py LlamaModel.generate_extra_tensors, as written there."""
    rope, base = rope_settings(config)
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = rope.get("factor", 8.0)
    low_freq_factor = rope.get("low_freq_factor", 1.0)
    high_freq_factor = rope.get("high_freq_factor", 4.0)
    old_context_len = rope.get("original_max_position_embeddings", 8192)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    rope_factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            rope_factors.append(1)
        elif wavelen > low_freq_wavelen:
            rope_factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            rope_factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(rope_factors, dtype=torch.float32)


def gguf_name(name, arch, n_layers):
    """The GGUF name gguf-py's own TensorNameMap (what convert_hf_to_gguf.py uses) gives `name`, checked
    to be a tensor llama.cpp's `arch` has."""
    model_arch = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}[arch]
    mapped = gguf.get_tensor_name_map(model_arch, n_layers).get_type_and_name(name, try_suffixes=(".weight", ".bias"))
    assert mapped is not None, f"gguf-py has no name for {name}"
    tensor_type, new_name = mapped
    assert tensor_type in gguf.MODEL_TENSORS[model_arch], f"{arch} has no {new_name}"
    return new_name


def expected_tensors(model_dir, config, arch):
    weights = {}
    files = sorted(model_dir.glob("*.safetensors"))
    for file in files:
        weights.update(load_file(file))
    adapter = load_json(model_dir / "adapter_config.json")
    if adapter:
        scaling = adapter["lora_alpha"] / adapter["r"]
        for name in [n for n in weights if n.endswith(".lora_A.weight")]:
            prefix = name[: -len(".lora_A.weight")]
            a, b = weights.pop(name), weights.pop(prefix + ".lora_B.weight")
            w = weights[prefix + ".weight"]
            weights[prefix + ".weight"] = (w.float() + scaling * (b.float() @ a.float())).to(w.dtype)
    n_head = config["num_attention_heads"]
    n_kv = config.get("num_key_value_heads", n_head)
    out = {}
    if rope_settings(config)[0].get("rope_type") == "llama3":
        out["rope_freqs.weight"] = llama3_rope_factors(config)
    for name, tensor in weights.items():
        if name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue
        if arch == "llama" and (".q_proj." in name or ".k_proj." in name):
            tensor = permute(tensor, n_head, n_head if ".q_proj." in name else n_kv)
        out[gguf_name(name, arch, config["num_hidden_layers"])] = tensor
    return out


def ggml_type(shape, ftype):
    if ftype == "f32" or len(shape) < 2:
        return Q.F32
    if ftype == "q8_0" and shape[-1] % 32 != 0:
        return Q.F16  # convert_hf_to_gguf.py's fallback when a row does not split into blocks
    return MATRIX_TYPES[ftype]


# --- comparison --------------------------------------------------------------------------------

def field_value(field):
    main = field.types[0]
    if main == V.ARRAY:
        return field.types[-1], list(field.contents())
    return main, field.contents()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", type=pathlib.Path)
    parser.add_argument("gguf", type=pathlib.Path)
    parser.add_argument("--type", required=True, choices=sorted(FILE_TYPES))
    parser.add_argument("--arch", required=True)
    parser.add_argument("--pre", default="default")
    parser.add_argument("--name", required=True)
    args = parser.parse_args()

    config = load_json(args.model_dir / "config.json")
    reader = GGUFReader(args.gguf)
    errors = []
    version = reader.fields["GGUF.version"].contents()
    if version != 3:
        errors.append(f"GGUF version {version}, expected 3")

    expected = model_metadata(config, args.arch, args.type, args.name)
    expected.update(vocab_metadata(args.model_dir, config["vocab_size"], args.pre))
    actual = {k: field_value(f) for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    for key in sorted(set(expected) | set(actual)):
        if key not in actual:
            errors.append(f"metadata {key}: missing (expected {str(expected[key])[:200]})")
        elif key not in expected:
            errors.append(f"metadata {key}: not expected (got {str(actual[key])[:200]})")
        elif actual[key] != expected[key]:
            (ta, va), (te, ve) = actual[key], expected[key]
            if isinstance(va, list) and isinstance(ve, list) and len(va) == len(ve):
                first = next(i for i in range(len(va)) if va[i] != ve[i]) if va != ve else None
                detail = f"first difference at [{first}]: {va[first]!r} != {ve[first]!r}" if first is not None else ""
                errors.append(f"metadata {key}: type {ta.name} vs {te.name}; {detail}")
            else:
                errors.append(f"metadata {key}: got {ta.name} {str(va)[:200]}, expected {te.name} {str(ve)[:200]}")

    tensors = expected_tensors(args.model_dir, config, args.arch)
    written = {t.name: t for t in reader.tensors}
    for name in sorted(set(tensors) | set(written)):
        if name not in written:
            errors.append(f"tensor {name}: missing")
            continue
        if name not in tensors:
            errors.append(f"tensor {name}: not expected")
            continue
        source, t = tensors[name], written[name]
        qtype = ggml_type(tuple(source.shape), args.type)
        if t.tensor_type != qtype:
            errors.append(f"tensor {name}: type {t.tensor_type.name}, expected {qtype.name}")
            continue
        shape = [int(d) for d in t.shape]
        if shape != list(reversed(source.shape)):
            errors.append(f"tensor {name}: ggml shape {shape}, expected {list(reversed(source.shape))}")
            continue
        want = np.ascontiguousarray(quantize(source.float().numpy(), qtype)).tobytes()
        got = np.ascontiguousarray(t.data).tobytes()
        if got != want:
            errors.append(f"tensor {name}: bytes differ ({len(got)} vs {len(want)} bytes)")
    for e in errors:
        print(e)
    print(f"checked {len(actual)} metadata keys and {len(written)} tensors of {args.gguf}: "
          f"{'OK' if not errors else str(len(errors)) + ' differences'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
