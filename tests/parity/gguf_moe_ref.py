#!/usr/bin/env python3
"""Tiny Mixture-of-Experts models shaped as llama.cpp runs them, for tests/parity/gguf_moe_parity_test.cpp
(GGUF import and export of the MoE families). Usage: gguf_moe_ref.py OUTDIR.

For each of qwen3_moe, qwen2_moe, mixtral, olmoe, OUTDIR/<name>/ gets
  model/                       transformers' save_pretrained (per-expert tensors, fp32) and a byte-level
                               BPE tokenizer.json over the 128 ids (0-2 <pad> <s> </s>, then one byte
                               each, 127 "ab", the one merge)
  logits.safetensors, generate.safetensors   as model_llama_ref.py writes them (transformers' fp32
                               logits on 3 left-padded rows, ...)
  converted.gguf               the folder converted as llama.cpp's converter converts it
                               (gguf_moe_convert.py: stacked experts, its metadata), written by
                               gguf-py's GGUFWriter (not by Ferry), in several ggml types quantised by
                               gguf.quants: ffn_gate_exps Q8_0, ffn_up_exps Q4_0, ffn_down_exps Q5_1,
                               Qwen2-MoE's shared expert Q8_0, attention F16, token_embd Q8_0, output
                               F16, norms and routers F32; Qwen2-MoE's shared expert gate 1-D (hidden,)
                               as older converters wrote it
  reference_gguf.safetensors   "logits": transformers' fp32 logits of converted.gguf's weights as
                               gguf-py dequantises them (written back per expert into dequantized/,
                               a Hugging Face folder), on logits.safetensors' inputs
The four differ from model_moe_ref.py's where llama.cpp fixes a setting: every layer sparse
(qwen3_moe has no mlp_only_layers), norm_topk_prob as llama.cpp's graph has it (qwen3moe and
Mixtral renormalise, qwen2moe and olmoe do not), no sliding window (Mixtral), OLMoE without
grouped-query attention (llama.cpp's olmoe k_norm is hidden_size wide) and with rms_norm_eps 1e-5
(the converter writes 1e-5 for OLMoE whatever the config says), expert widths multiples of 32
(ggml's block types).

OUTDIR/kquant_<name>/ (same four families): model folders for llama-quantize's types (row widths
of 256 values, 4 layers, vocabulary 512 with gguf_kquant_export_ref.py's tokenizer): mixtral with 8
experts (llama.cpp's n_expert == 8 rules: attn_v, attn_k Q8_0, attn_output Q5_K), qwen2_moe with
128-wide experts (not a multiple of 256: the fallback types) and a 384-wide shared expert,
qwen3_moe and olmoe with 256-wide experts.
"""
import json
import pathlib
import sys

import gguf
import torch
from safetensors.torch import load_file, save_file
from transformers import (MixtralConfig, MixtralForCausalLM, OlmoeConfig, OlmoeForCausalLM, Qwen2MoeConfig,
                          Qwen2MoeForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

from gguf_kquant_export_ref import write_tokenizer as write_kquant_tokenizer
from gguf_moe_convert import (ARCH, Q, converter_keys, converter_tensors, dequantized_logits, hparams, is_router,
                              quantized, tokenizer_tokens)
from model_llama_ref import PAD, VOCAB, random_causal_lm, write_causal_lm_reference
from model_moe_ref import ROUTER_STD

COMMON = dict(vocab_size=VOCAB, max_position_embeddings=256, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
              initializer_range=0.2, num_hidden_layers=3, hidden_size=64, num_attention_heads=4,
              num_key_value_heads=2, rms_norm_eps=1e-6, num_experts_per_tok=2, tie_word_embeddings=False)

MODELS = {
    "qwen3_moe": (Qwen3MoeForCausalLM, lambda: Qwen3MoeConfig(
        intermediate_size=96, moe_intermediate_size=64, num_experts=6, norm_topk_prob=True, head_dim=16,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **COMMON)),
    "qwen2_moe": (Qwen2MoeForCausalLM, lambda: Qwen2MoeConfig(
        intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=96, num_experts=4,
        norm_topk_prob=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **COMMON)),
    "mixtral": (MixtralForCausalLM, lambda: MixtralConfig(
        intermediate_size=64, num_local_experts=4, sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **COMMON)),
    "olmoe": (OlmoeForCausalLM, lambda: OlmoeConfig(
        intermediate_size=64, num_experts=5, norm_topk_prob=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **{**COMMON, "num_key_value_heads": 4, "rms_norm_eps": 1e-5})),
}

KQUANT_COMMON = dict(vocab_size=512, max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                     num_hidden_layers=4, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                     rms_norm_eps=1e-6, num_experts_per_tok=2, tie_word_embeddings=False)
KQUANT = {
    "mixtral": (MixtralForCausalLM, lambda: MixtralConfig(
        intermediate_size=256, num_local_experts=8, sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **KQUANT_COMMON)),
    "qwen2_moe": (Qwen2MoeForCausalLM, lambda: Qwen2MoeConfig(
        intermediate_size=512, moe_intermediate_size=128, shared_expert_intermediate_size=384, num_experts=4,
        norm_topk_prob=False, rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **KQUANT_COMMON)),
    "qwen3_moe": (Qwen3MoeForCausalLM, lambda: Qwen3MoeConfig(
        intermediate_size=512, moe_intermediate_size=256, num_experts=4, norm_topk_prob=True, head_dim=64,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **KQUANT_COMMON)),
    "olmoe": (OlmoeForCausalLM, lambda: OlmoeConfig(
        intermediate_size=256, num_experts=4, norm_topk_prob=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **{**KQUANT_COMMON, "num_key_value_heads": 4, "rms_norm_eps": 1e-5})),
}


def byte_level_chars():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = {}, 0
    for b in range(256):
        chars[b] = chr(b) if b in printable else chr(256 + n)
        n += b not in printable
    return chars


def write_tokenizer(folder, size=VOCAB):
    """Ids 0-2 the special <pad> <s> </s>, 3 .. size-2 the byte-level character of that byte, size-1
    "ab" (the one merge: llama.cpp refuses a BPE vocabulary without merges)."""
    chars = byte_level_chars()
    specials = ["<pad>", "<s>", "</s>"]
    vocab = {text: i for i, text in enumerate(specials)}
    for i in range(3, size - 1):
        vocab[chars[i]] = i
    vocab["ab"] = size - 1
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(specials)]
    tokenizer = {
        "version": "1.0", "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": ["a b"]},
    }
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False))


def build(model_class, config, seed):
    torch.manual_seed(seed)
    model = random_causal_lm(model_class, config, random_norms=True)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(".gate.weight"):  # the routers: clear top-k choices (model_moe_ref.py)
                parameter.normal_(0.0, ROUTER_STD)
    return model


def file_type(gguf_name, tensor):
    """The mixed types of converted.gguf (see the top)."""
    if tensor.dim() <= 1 or gguf_name.endswith("_norm.weight") or is_router(gguf_name) or gguf_name.endswith(".bias"):
        return Q.F32
    for part, qtype in (("ffn_gate_exps", Q.Q8_0), ("ffn_up_exps", Q.Q4_0), ("ffn_down_exps", Q.Q5_1),
                        ("_shexp", Q.Q8_0), ("token_embd", Q.Q8_0)):
        if part in gguf_name:
            return qtype
    return Q.F16


def write_converted_gguf(folder, path):
    """folder (a Hugging Face model with tokenizer.json) -> path, as the converter lays it out."""
    config = hparams(folder)
    arch = ARCH[config["model_type"]]
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name("ferry moe fixture")
    for key, value, kind in converter_keys(config):
        getattr(writer, f"add_{kind}")(f"{arch}.{key}", value)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    tokens, special, merges = tokenizer_tokens(folder)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
                            for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(0)
    for gguf_name, tensor in converter_tensors(folder, config).items():
        if gguf_name.endswith("ffn_gate_inp_shexp.weight"):
            tensor = tensor.reshape(-1)  # older converters: (hidden,)
        qtype = file_type(gguf_name, tensor)
        writer.add_tensor(gguf_name, quantized(tensor, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    for seed, (name, (model_class, make_config)) in enumerate(MODELS.items()):
        folder = out / name
        write_causal_lm_reference(model_class, make_config(), folder, 40 + seed,
                                  model=build(model_class, make_config(), 900 + seed))
        write_tokenizer(folder / "model")
        write_converted_gguf(folder / "model", folder / "converted.gguf")
        inputs = load_file(str(folder / "logits.safetensors"))
        logits = dequantized_logits(folder / "model", folder / "converted.gguf", folder / "dequantized", inputs)
        save_file({"logits": logits.contiguous()}, str(folder / "reference_gguf.safetensors"))
        print(f"{name}: converted.gguf ({(folder / 'converted.gguf').stat().st_size} bytes), logits of its weights "
              f"differ from the fp32 model's by {float((logits - inputs['logits']).abs().max()):.3g}")
    for seed, (name, (model_class, make_config)) in enumerate(KQUANT.items()):
        folder = out / f"kquant_{name}"
        build(model_class, make_config(), 950 + seed).save_pretrained(folder, safe_serialization=True)
        write_kquant_tokenizer(folder, 512)
        print(f"kquant_{name}: {model_class.__name__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
