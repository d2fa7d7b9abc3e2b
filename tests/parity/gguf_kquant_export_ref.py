#!/usr/bin/env python3
"""Input model folders for tests/parity/gguf_kquant_export_parity_test.cpp (`ferry export --format gguf
--gguf-type q4_k_m ...` against llama.cpp's llama_model_quantize), written by transformers'
save_pretrained (random weights, fp32) with a byte-level BPE tokenizer.json:

  OUTDIR/llama   LlamaForCausalLM, 8 layers (so use_more_bits picks layers 0, 3, 6, 7), hidden 256,
                 GQA 4/2 heads, intermediate 640: ffn_down's rows (640 values) are not a multiple of
                 256, so Q4_K/Q5_K/Q6_K fall back to Q5_0/Q5_1/Q8_0 there; untied output
  OUTDIR/qwen2   Qwen2ForCausalLM, 4 layers, q/k/v biases, tied embeddings (token_embd quantised as the
                 output)
  OUTDIR/phi3    Phi3ForCausalLM, 4 layers: fused qkv (attn_qkv, counted as attn_v) and gate_up
  OUTDIR/gemma3  Gemma3ForCausalLM, 6 layers with llama.cpp's pattern (5 sliding, 1 global), q/k norms,
                 sandwich norms (stored + 1), tied embeddings, query_pre_attn_scalar = head_dim (what
                 llama.cpp runs)

Tokenizer: ids 0-2 the special <pad>, <s>, </s>; 3-258 one per byte (GPT-2's byte-to-character map);
259 "ab" (the one merge: llama.cpp needs merges); the rest filler pieces up to the vocabulary size.
"""
import json
import pathlib
import sys

import torch
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, Phi3Config,
                          Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM)

VOCAB = 512
COMMON = dict(vocab_size=VOCAB, max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def bytes_to_unicode():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def write_tokenizer(folder, size=VOCAB):
    chars = bytes_to_unicode()
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[chars[b]] = 3 + b
    vocab["ab"] = 259
    i = 0
    while len(vocab) < size:
        vocab[f"x{i}"] = len(vocab)
        i += 1
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(["<pad>", "<s>", "</s>"])]
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


MODELS = {
    "llama": (LlamaForCausalLM, lambda: LlamaConfig(
        hidden_size=256, intermediate_size=640, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
        rms_norm_eps=1e-5, tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **COMMON)),
    "qwen2": (Qwen2ForCausalLM, lambda: Qwen2Config(
        hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        rms_norm_eps=1e-6, tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        **COMMON)),
    "phi3": (Phi3ForCausalLM, lambda: Phi3Config(
        hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        sliding_window=None, rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **COMMON)),
    "gemma3": (Gemma3ForCausalLM, lambda: Gemma3TextConfig(
        hidden_size=256, intermediate_size=512, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=1,
        head_dim=64, query_pre_attn_scalar=64, hidden_activation="gelu_pytorch_tanh", sliding_window=512,
        layer_types=["sliding_attention"] * 5 + ["full_attention"], tie_word_embeddings=True, rms_norm_eps=1e-6,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        **COMMON)),
}


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    for seed, (name, (model_class, config)) in enumerate(MODELS.items()):
        torch.manual_seed(700 + seed)
        model = model_class(config()).eval()
        with torch.no_grad():  # norms away from 1, so their offsets and placement matter
            for param_name, p in model.named_parameters():
                if "norm" in param_name:
                    p.add_(torch.randn_like(p) * 0.1)
        folder = out / name
        model.save_pretrained(folder)
        write_tokenizer(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
