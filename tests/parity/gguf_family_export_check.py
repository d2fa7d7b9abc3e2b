#!/usr/bin/env python3
"""Checks a GGUF file that Ferry's export_gguf_model wrote from one of the model-family fixtures
(model_families_ref.py) with the tools people will read it with; run by
gguf_family_export_parity_test.cpp.

  gguf_family_export_check.py FILE.gguf FIXTURE_DIR [--source MODEL_DIR]

FIXTURE_DIR holds logits.safetensors (input_ids, attention_mask, transformers' fp32 logits) and
model/; MODEL_DIR (default FIXTURE_DIR/model) is the Hugging Face folder that was exported (a copy
of model/ whose config.json may have been brought to what llama.cpp runs). Checks:
  1. gguf-py's GGUFReader reads the file; general.architecture is the one llama.cpp's
     convert_hf_to_gguf.py gives the folder's model_type, and gguf-py knows it;
  2. every tensor name is one llama.cpp's architecture has (gguf.constants MODEL_TENSORS /
     TENSOR_NAMES with the block index), the set is the converter's (gguf-py's TensorNameMap of
     the folder's weights, plus phi3's LongRoPE factor tensors), and every shape is the one the
     metadata implies (embedding_length, feed_forward_length, head counts, key/value length,
     vocab_size, rope.dimension_count);
  3. every tensor's values are the folder's weight as the converter writes it (llama and smollm3:
     q/k rows permuted, LlamaModel.permute; gemma2/gemma3: norm weights + 1): exact for f32;
  4. where transformers' GGUF loader supports the architecture, from_pretrained(dir,
     gguf_file=name) gives the folder's fp32 logits within 1e-4 of the logit scale. Where its
     GGUF config reader drops settings the file or llama.cpp's constants carry (e.g. Gemma's
     soft-caps, LongRoPE factors, Qwen 3's head_dim), the differences are printed, that comparison
     is skipped, and the logits of the weights transformers reads, under its config with those keys
     set as the source's, must match instead (a difference on a key it does read from the file
     fails).
  5. llama.cpp itself (llama-cpp-python, when installed) loads the file and, on each fixture row
     without padding, gives the folder's fp32 logits within 1e-3 of the logit scale (llama.cpp
     accumulates some products in f16: Gemma 2 measured 8e-4). Skipped, saying why, where llama.cpp
     runs the model otherwise by design: phi3 with a sliding window (llama.cpp disables Phi's
     SWA), and LongRoPE below the original context (llama.cpp pads its context to 256 tokens and
     picks the long factors by context size, not by sequence length).

  gguf_family_export_check.py --reference MODEL_DIR FIXTURE_DIR OUT.safetensors

writes transformers' fp32 logits of MODEL_DIR on the fixture's inputs (as model_llama_ref.py
computes them) to OUT.safetensors ("logits"), for copies whose config.json was changed.
Prints what it checked and every difference; exits 1 if a check fails.
"""
import json
import math
import pathlib
import sys

import gguf
import numpy as np
import torch
from gguf import GGUFReader
from safetensors.torch import load_file, save_file

# model_type -> the architecture convert_hf_to_gguf.py writes (Mistral as llama; OLMo 3 is
# registered on Olmo2Model: "olmo2" with sliding_window and sliding_window_pattern).
LLAMA_CPP_ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2",
                  "gemma3_text": "gemma3", "smollm3": "smollm3", "olmo2": "olmo2", "olmo3": "olmo2", "phi3": "phi3"}
PERMUTED_QK = {"llama", "smollm3"}  # LlamaModel and its subclass SmolLM3Model permute q/k rows
NORMS_PLUS_ONE = {"gemma2", "gemma3"}  # Gemma2Model / Gemma3Model write norm weights + 1
# config.json keys that change the logits, compared between the source and what transformers' GGUF
# loader makes of the file.
CONFIG_KEYS = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "head_dim", "rms_norm_eps", "vocab_size", "tie_word_embeddings", "sliding_window", "layer_types",
               "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "rope_parameters",
               "partial_rotary_factor", "no_rope_layers", "original_max_position_embeddings", "hidden_activation",
               "hidden_act", "attention_bias", "mlp_bias"]

failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def positions(mask):
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def max_error_on_tokens(a, b, mask):
    return float(((a.float() - b.float()).abs() * mask.bool().unsqueeze(-1)).max())


def field(reader, key, default=None):
    f = reader.get_field(key)
    if f is None:
        return default
    value = f.contents()
    return value


def transformers_logits(model, inputs):
    with torch.no_grad():
        mask = inputs["attention_mask"]
        return model(input_ids=inputs["input_ids"], attention_mask=mask, position_ids=positions(mask)).logits


def source_logits(source, inputs):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
    return transformers_logits(model, inputs)


# --- 1 + 2: architecture, names, shapes ---------------------------------------------------------------

def arch_enum(arch):
    return {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}.get(arch)


def implied_shapes(reader, arch):
    """The shape (Hugging Face order: rows first) llama.cpp expects for each tensor kind, from the
    file's metadata."""
    key = lambda k, default=None: field(reader, f"{arch}.{k}", default)  # noqa: E731
    embd, ff, layers = key("embedding_length"), key("feed_forward_length"), key("block_count")
    heads = key("attention.head_count")
    kv_heads = key("attention.head_count_kv", heads)
    k_len = key("attention.key_length", embd // heads)
    v_len = key("attention.value_length", k_len)
    vocab = key("vocab_size", len(field(reader, "tokenizer.ggml.tokens", [])))
    rope_dim = key("rope.dimension_count", k_len)
    T = gguf.MODEL_TENSOR
    whole_qk_norm = arch == "olmo2"  # OLMo 2's q/k norms span the whole projection
    shapes = {
        T.TOKEN_EMBD: (vocab, embd), T.OUTPUT: (vocab, embd), T.OUTPUT_NORM: (embd,),
        T.ATTN_NORM: (embd,), T.FFN_NORM: (embd,), T.FFN_PRE_NORM: (embd,), T.ATTN_POST_NORM: (embd,), T.FFN_POST_NORM: (embd,),
        T.ATTN_Q: (heads * k_len, embd), T.ATTN_K: (kv_heads * k_len, embd), T.ATTN_V: (kv_heads * v_len, embd),
        T.ATTN_OUT: (embd, heads * v_len), T.ATTN_QKV: (heads * k_len + kv_heads * (k_len + v_len), embd),
        T.ATTN_Q_NORM: (heads * k_len,) if whole_qk_norm else (k_len,),
        T.ATTN_K_NORM: (kv_heads * k_len,) if whole_qk_norm else (k_len,),
        T.FFN_GATE: (ff, embd), T.FFN_UP: (2 * ff if arch == "phi3" else ff, embd), T.FFN_DOWN: (embd, ff),
        T.ROPE_FREQS: (rope_dim // 2,), T.ROPE_FACTORS_LONG: (rope_dim // 2,), T.ROPE_FACTORS_SHORT: (rope_dim // 2,),
    }
    return shapes, layers


def llama_cpp_names(arch, layers):
    """gguf name (no .weight/.bias suffix) -> MODEL_TENSOR for every tensor the architecture has."""
    names = {}
    for kind in gguf.MODEL_TENSORS[arch_enum(arch)]:
        template = gguf.TENSOR_NAMES[kind]
        for bid in (range(layers) if "{bid}" in template else [None]):
            names[template.format(bid=bid)] = kind
    return names


def check_names_and_shapes(reader, arch, expected_names):
    shapes, layers = implied_shapes(reader, arch)
    known = llama_cpp_names(arch, layers)
    got = {}
    for tensor in reader.tensors:
        got[tensor.name] = tensor
        base, _, suffix = tensor.name.rpartition(".")
        if suffix not in ("weight", "bias") or base not in known:
            fail(f"tensor {tensor.name}: not a name llama.cpp's {arch} has")
            continue
        shape = tuple(int(d) for d in reversed(tensor.shape))  # ggml's ne is innermost first
        implied = shapes.get(known[base])
        if implied is None:
            fail(f"tensor {tensor.name}: no shape rule for {known[base].name} here")
            continue
        if suffix == "bias":
            implied = implied[:1]
        if shape != implied:
            fail(f"tensor {tensor.name}: shape {shape}, the metadata implies {implied}")
    missing, extra = sorted(set(expected_names) - set(got)), sorted(set(got) - set(expected_names))
    if missing:
        fail(f"tensors the converter writes but the file lacks: {missing}")
    if extra:
        fail(f"tensors the converter does not write: {extra}")
    print(f"{len(reader.tensors)} tensors: names of llama.cpp's {arch}, shapes as the metadata implies")
    return got


# --- 3: values ----------------------------------------------------------------------------------------

def permute(w, n_head, n_head_kv):  # convert_hf_to_gguf.py LlamaModel.permute
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rope_config(config):
    return config.get("rope_parameters") or config.get("rope_scaling") or {}


def converter_tensors(source, config, arch):
    """gguf name -> the tensor convert_hf_to_gguf.py writes for the folder's weights (fp32)."""
    weights = {}
    for file in sorted(source.glob("*.safetensors")):
        weights.update(load_file(str(file)))
    name_map = gguf.get_tensor_name_map(arch_enum(arch), config["num_hidden_layers"])
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    out = {}
    for name, w in weights.items():
        if name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue
        w = w.float()
        if arch in PERMUTED_QK and name.endswith("q_proj.weight"):
            w = permute(w, heads, heads)
        if arch in PERMUTED_QK and name.endswith("k_proj.weight"):
            w = permute(w, heads, kv_heads)
        if arch in NORMS_PLUS_ONE and name.endswith("norm.weight"):
            w = w + 1
        gguf_name = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            fail(f"gguf-py's TensorNameMap has no {arch} name for {name}")
            continue
        out[gguf_name] = w
    rope = rope_config(config)
    if arch == "phi3" and rope.get("rope_type", rope.get("type")) in ("longrope", "su"):
        out["rope_factors_long.weight"] = torch.tensor(rope["long_factor"], dtype=torch.float32)
        out["rope_factors_short.weight"] = torch.tensor(rope["short_factor"], dtype=torch.float32)
    return out


def check_values(got, expected):
    worst = 0.0
    for name, tensor in got.items():
        if name not in expected:
            continue
        if tensor.tensor_type != gguf.GGMLQuantizationType.F32:
            fail(f"tensor {name}: type {tensor.tensor_type.name}, expected F32")
            continue
        data = torch.from_numpy(np.array(tensor.data, dtype=np.float32))
        if tuple(data.shape) != tuple(expected[name].shape):
            fail(f"tensor {name}: data shape {tuple(data.shape)}, the converter's {tuple(expected[name].shape)}")
            continue
        error = float((data - expected[name]).abs().max())
        worst = max(worst, error)
        if error > 0:
            fail(f"tensor {name}: max |file - converter| {error}")
    print(f"tensor values equal the converter's (max difference {worst})")


# --- 4: transformers' gguf_file= ---------------------------------------------------------------------

def normalise(value):
    if isinstance(value, float):
        return float(np.float32(value))
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    return value


def config_differences(source_config, loaded):
    """Keys of CONFIG_KEYS whose value in `loaded` (a transformers config) differs from the source."""
    from transformers import AutoConfig
    source = AutoConfig.for_model(**source_config).to_dict()
    loaded = loaded.to_dict()
    return {key: (source.get(key), loaded.get(key)) for key in CONFIG_KEYS
            if normalise(source.get(key)) != normalise(loaded.get(key))}


def rope_theta(config):
    rope = config.get("rope_parameters") or {}
    if "rope_theta" not in rope and rope:  # per layer type: the full-attention layers'
        rope = rope.get("full_attention", next(iter(rope.values())))
    return rope.get("rope_theta", config.get("rope_theta"))


def check_transformers(file, source, config, arch, inputs, reference, scale):
    """Step 4. A config difference on a key transformers' GGUF reader takes from the file is the
    file's error; one it does not take from the file (its class default) is its reader's limit."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES, load_gguf_checkpoint
    if arch not in GGUF_SUPPORTED_ARCHITECTURES:
        print(f"transformers: NOT LOADED, its GGUF loader does not support the architecture '{arch}' "
              f"(GGUF_SUPPORTED_ARCHITECTURES); its logits are not compared")
        return
    parsed = load_gguf_checkpoint(str(file), return_tensors=False)["config"]
    differences = config_differences(config, AutoConfig.for_model(**parsed))
    from_file = {key for key in differences if key in parsed}
    if "rope_parameters" in differences and normalise(parsed.get("rope_theta")) != normalise(rope_theta(config)):
        from_file.add("rope_parameters")
    for key in sorted(from_file):
        fail(f"transformers reads {key}={differences[key][1]!r} from the file; the source has {differences[key][0]!r}")
    mask = inputs["attention_mask"]
    tolerance = 1e-4 * max(1.0, scale)
    error = None
    try:
        model = AutoModelForCausalLM.from_pretrained(file.parent, gguf_file=file.name, dtype=torch.float32).eval()
        error = max_error_on_tokens(transformers_logits(model, inputs), reference, mask)
        outcome = f"{type(model).__name__}, max error {error:.3g} (logit scale {scale:.3g})"
    except Exception as e:  # noqa: BLE001 (a config it reads wrongly can make the weights not fit)
        outcome = f"does not load ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
    if error is not None and error <= tolerance:
        print(f"transformers gguf_file=: {outcome}"
              + (f"; config differences without effect here: {differences}" if differences else ""))
        return
    if not differences:
        fail(f"transformers gguf_file=: {outcome}, over 1e-4 of the logit scale, with the source's config")
        return
    limits = {key: value for key, value in differences.items() if key not in from_file}
    print(f"transformers gguf_file=: {outcome}; its logits NOT COMPARED: its GGUF config reader does not carry "
          + ", ".join(f"{key} (gives {value[1]!r}, source {value[0]!r})" for key, value in limits.items()))
    # The weights transformers reads from the file, under its config with those keys set as the source's.
    config_with_source_keys = AutoConfig.for_model(**parsed)
    for key, (source_value, _) in limits.items():
        setattr(config_with_source_keys, key, source_value)
    model = AutoModelForCausalLM.from_pretrained(file.parent, gguf_file=file.name, dtype=torch.float32,
                                                 config=config_with_source_keys).eval()
    error = max_error_on_tokens(transformers_logits(model, inputs), reference, mask)
    print(f"transformers gguf_file= weights, those keys set as the source's: {type(model).__name__}, max error "
          f"{error:.3g} (logit scale {scale:.3g})")
    if error > tolerance:
        fail(f"transformers gguf_file= with the source's {sorted(limits)}: max error {error:.3g} > 1e-4 of {scale:.3g}")


def check_llama_cpp(file, config, inputs, reference, scale):
    try:
        from llama_cpp import Llama
    except ImportError:
        print("llama.cpp: llama_cpp is not installed, not run")
        return
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    longrope = rope.get("rope_type", rope.get("type")) == "longrope"
    original = config.get("original_max_position_embeddings", rope.get("original_max_position_embeddings", 0))
    mask = inputs["attention_mask"]
    rows = [r for r in range(mask.shape[0]) if bool(mask[r].all())]
    if config["model_type"] == "phi3" and config.get("sliding_window"):
        print("llama.cpp: not compared: its phi3 disables the sliding window (\"Phi SWA is currently disabled\")")
        return
    if longrope and mask.shape[1] <= original:
        print("llama.cpp: not compared: below LongRoPE's original context it takes the long factors by its padded "
              "context size (256), transformers the short ones by sequence length")
        return
    if not rows:
        print("llama.cpp: not compared: every fixture row has padding")
        return
    llm = Llama(model_path=str(file), n_ctx=64, logits_all=True, verbose=False, n_threads=1, type_k=0, type_v=0)
    worst = 0.0
    for r in rows:
        llm.reset()
        ids = inputs["input_ids"][r].tolist()
        llm.eval(ids)
        got = torch.tensor(np.array(llm.scores[:len(ids)]), dtype=torch.float32)
        worst = max(worst, float((got - reference[r].float()).abs().max()))
    print(f"llama.cpp (llama-cpp-python) logits on {len(rows)} unpadded row(s): max error {worst:.3g} "
          f"(logit scale {scale:.3g})")
    if not worst <= 1e-3 * scale:
        fail(f"llama.cpp: max error {worst:.3g} > 1e-3 of {scale:.3g}")


def main(argv):
    if argv[:1] == ["--reference"]:
        source, fixture, out = map(pathlib.Path, argv[1:4])
        inputs = load_file(str(fixture / "logits.safetensors"))
        save_file({"logits": source_logits(source, inputs).contiguous()}, str(out))
        return 0
    file, fixture = pathlib.Path(argv[0]), pathlib.Path(argv[1])
    source = pathlib.Path(argv[3]) if argv[2:3] == ["--source"] else fixture / "model"
    config = json.loads((source / "config.json").read_text())
    inputs = load_file(str(fixture / "logits.safetensors"))
    torch.set_num_threads(1)

    reader = GGUFReader(file)
    arch = field(reader, "general.architecture")
    wanted = LLAMA_CPP_ARCH.get(config["model_type"])
    print(f"{file.name}: general.architecture {arch!r} (convert_hf_to_gguf.py: {wanted!r})")
    if arch != wanted:
        fail(f"general.architecture is {arch!r}; llama.cpp's converter writes {wanted!r} for model_type "
             f"{config['model_type']!r}")
    if arch_enum(arch) is None:
        fail(f"gguf-py {getattr(gguf, '__version__', '')} has no architecture {arch!r} (MODEL_ARCH_NAMES): "
             f"llama.cpp cannot load the file")
        return 1
    expected = converter_tensors(source, config, arch)
    got = check_names_and_shapes(reader, arch, expected)
    check_values(got, expected)

    reference = inputs["logits"]
    if source != fixture / "model":  # a changed copy: transformers' logits of that copy
        reference = source_logits(source, inputs)
    check_transformers(file, source, config, arch, inputs, reference, float(reference.abs().max()))
    check_llama_cpp(file, config, inputs, reference, float(reference.abs().max()))
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
