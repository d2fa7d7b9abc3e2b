"""llama.cpp's convert_hf_to_gguf.py for the Mixture-of-Experts families, restated on gguf-py for the
GGUF MoE tests (gguf_moe_ref.py writes files with it, gguf_moe_check.py checks Ferry's exports
against it). What it restates, from the converter's classes:

  TextModel.set_gguf_parameters  block_count, context_length, embedding_length, feed_forward_length
                                 (intermediate_size), head_count, head_count_kv, rope.freq_base,
                                 layer_norm_rms_epsilon, expert_count (num_local_experts or
                                 num_experts), expert_used_count, key_length / value_length when the
                                 config has head_dim, file_type
  Qwen2MoeModel (and Qwen3MoeModel) + expert_feed_forward_length (moe_intermediate_size),
                                 expert_shared_feed_forward_length (shared_expert_intermediate_size)
  OlmoeModel                     layer_norm_rms_epsilon overwritten with 1e-5
  LlamaModel (MixtralForCausalLM) vocab_size, rope.dimension_count; q/k rows permuted (permute)
  modify_tensors                 each layer's experts stacked, expert e at index e: model.layers.N.
                                 mlp.experts.{gate,up,down}_proj (Mixtral: block_sparse_moe.experts.
                                 {w1,w3,w2}) -> blk.N.ffn_{gate,up,down}_exps, names from gguf-py's
                                 TensorNameMap
  prepare_tensors                types: 1-D and *_norm.weight F32, the routers (FFN_GATE_INP,
                                 FFN_GATE_INP_SHEXP) and non-weights F32, else the outtype, Q8_0
                                 falling back to F16 when a row is not whole blocks
"""
import json
import pathlib

import gguf
import numpy as np
import torch
from gguf import GGUFReader
from safetensors.torch import load_file, save_file

Q = gguf.GGMLQuantizationType
# config.json model_type -> llama.cpp's architecture (Mixtral: LlamaModel).
ARCH = {"qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe", "mixtral": "llama", "olmoe": "olmoe"}


def arch_enum(arch):
    return {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}[arch]


def hparams(folder):
    """The config as the converter reads it: transformers' AutoConfig, as a dict."""
    from transformers import AutoConfig
    return AutoConfig.from_pretrained(folder).to_dict()


def load_weights(folder):
    weights = {}
    for file in sorted(pathlib.Path(folder).glob("*.safetensors")):
        weights.update(load_file(str(file)))
    return weights


def permute(w, n_head, n_head_kv):  # LlamaModel.permute
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def experts_of(config):
    return config.get("num_local_experts") or config.get("num_experts")


def gguf_place(name, config, name_map):
    """Where the converter puts Hugging Face weight `name`: (gguf name, expert index or None)."""
    if ".experts." in name:
        parts = name.split(".")  # model.layers.N.<block>.experts.E.<proj>.weight
        layer, expert, proj = int(parts[2]), int(parts[5]), parts[6]
        merged = (f"layers.{layer}.feed_forward.experts.{proj}" if config["model_type"] == "mixtral"
                  else f"model.layers.{layer}.mlp.experts.{proj}")
        return name_map.get_name(merged) + ".weight", expert
    gguf_name = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
    if gguf_name is None:
        raise ValueError(f"gguf-py has no {ARCH[config['model_type']]} name for {name}")
    return gguf_name, None


def tensor_name_map(config):
    return gguf.get_tensor_name_map(arch_enum(ARCH[config["model_type"]]), config["num_hidden_layers"])


def permuted(name, w, config, inverse=False):
    """LlamaModel's q/k row permutation for the llama architecture (Mixtral); `inverse` undoes it."""
    if ARCH[config["model_type"]] != "llama" or not name.endswith(("q_proj.weight", "k_proj.weight")):
        return w
    heads = config["num_attention_heads"]
    groups = heads if name.endswith("q_proj.weight") else config["num_key_value_heads"]
    if not inverse:
        return permute(w, heads, groups)
    return w.reshape(groups, w.shape[0] // groups // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def converter_tensors(folder, config):
    """gguf name -> the float32 tensor (torch order) the converter writes for the folder's weights."""
    name_map = tensor_name_map(config)
    experts = experts_of(config)
    out, stacks = {}, {}
    for name, w in load_weights(folder).items():
        gguf_name, expert = gguf_place(name, config, name_map)
        w = permuted(name, w.float(), config)
        if expert is None:
            out[gguf_name] = w
        else:
            stacks.setdefault(gguf_name, {})[expert] = w
    for gguf_name, by_expert in stacks.items():
        assert sorted(by_expert) == list(range(experts)), (gguf_name, sorted(by_expert))
        out[gguf_name] = torch.stack([by_expert[e] for e in range(experts)], 0)
    return out


def converter_keys(config):
    """(key without the architecture, value, gguf-py writer method) the converter writes."""
    arch = ARCH[config["model_type"]]
    rope = config.get("rope_parameters") or {}
    keys = [("block_count", config["num_hidden_layers"], "uint32"),
            ("context_length", config["max_position_embeddings"], "uint32"),
            ("embedding_length", config["hidden_size"], "uint32"),
            ("feed_forward_length", config["intermediate_size"], "uint32"),
            ("attention.head_count", config["num_attention_heads"], "uint32"),
            ("attention.head_count_kv", config["num_key_value_heads"], "uint32"),
            ("rope.freq_base", rope.get("rope_theta", config.get("rope_theta")), "float32"),
            ("attention.layer_norm_rms_epsilon", 1e-5 if arch == "olmoe" else config["rms_norm_eps"], "float32"),
            ("expert_count", experts_of(config), "uint32"),
            ("expert_used_count", config["num_experts_per_tok"], "uint32")]
    if config.get("head_dim") is not None:
        keys += [("attention.key_length", config["head_dim"], "uint32"),
                 ("attention.value_length", config["head_dim"], "uint32")]
    if arch in ("qwen2moe", "qwen3moe"):
        keys.append(("expert_feed_forward_length", config["moe_intermediate_size"], "uint32"))
        if config.get("shared_expert_intermediate_size") is not None:
            keys.append(("expert_shared_feed_forward_length", config["shared_expert_intermediate_size"], "uint32"))
    if arch == "llama":
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        keys += [("vocab_size", config["vocab_size"], "uint32"), ("rope.dimension_count", head_dim, "uint32")]
    return keys


def is_router(gguf_name):
    return gguf_name.endswith((".ffn_gate_inp.weight", ".ffn_gate_inp_shexp.weight"))


def converter_type(gguf_name, tensor, outtype):
    """The ggml type prepare_tensors gives a tensor at --outtype f32 / f16 / bf16 / q8_0."""
    if tensor.dim() <= 1 or gguf_name.endswith("_norm.weight") or is_router(gguf_name) \
            or not gguf_name.endswith(".weight"):
        return Q.F32
    wanted = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}[outtype]
    if wanted == Q.Q8_0 and tensor.shape[-1] % 32 != 0:
        return Q.F16  # gguf.quants.quantize's QuantError -> "falling back to F16"
    return wanted


def quantized(tensor, qtype):
    """The bytes gguf-py writes for `tensor` (float32, torch order) as `qtype`."""
    data = tensor.detach().float().contiguous().numpy()
    if qtype == Q.F32:
        return data
    if qtype == Q.F16:
        return data.astype(np.float16)
    return gguf.quants.quantize(data, qtype)


def tokenizer_tokens(folder):
    """The folder's tokenizer.json vocabulary in id order, and the ids of its added (special) tokens."""
    tokenizer = json.loads((pathlib.Path(folder) / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    special = {t["id"] for t in tokenizer["added_tokens"] if t.get("special")}
    return tokens, special, tokenizer["model"]["merges"]


def write_dequantized(folder, gguf_path, out):
    """The Hugging Face weights gguf-py reads back from gguf_path (per expert, q/k rows un-permuted)
    as a model folder `out` beside folder's config.json."""
    config = hparams(folder)
    name_map = tensor_name_map(config)
    stored = {t.name: torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy()).float()
              for t in GGUFReader(gguf_path).tensors}
    weights = {}
    for name, original in load_weights(folder).items():
        gguf_name, expert = gguf_place(name, config, name_map)
        w = stored[gguf_name] if expert is None else stored[gguf_name][expert]
        weights[name] = permuted(name, w.reshape(original.shape), config, inverse=True).contiguous()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text((folder / "config.json").read_text())
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})


def dequantized_logits(folder, gguf_path, out, inputs):
    """transformers' fp32 logits on `inputs` (input_ids, attention_mask: left padding, positions from
    the mask) of gguf_path's weights as gguf-py dequantises them (written to the folder `out`)."""
    from transformers import AutoModelForCausalLM
    write_dequantized(pathlib.Path(folder), gguf_path, pathlib.Path(out))
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    mask = inputs["attention_mask"]
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
    with torch.no_grad():
        return model(input_ids=inputs["input_ids"], attention_mask=mask, position_ids=positions).logits
