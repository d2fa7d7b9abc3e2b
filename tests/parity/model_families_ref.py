#!/usr/bin/env python3
"""Reference outputs of tiny random models of the Llama-family architectures people fine-tune
today, for the model and generation parity tests (the files model_llama_ref.py writes, same layout).

Usage: model_families_ref.py OUTDIR. For each model below, OUTDIR/<name>/ gets model/ (the
family's save_pretrained), logits.safetensors and generate.safetensors (see model_llama_ref.py);
every RMSNorm weight (q_norm and k_norm included) is random around 1, not 1:
  qwen3              Qwen3ForCausalLM: per-head q/k RMSNorms, head_dim 32 != hidden/heads (16),
                     GQA, tied embeddings (as Qwen3-0.6B), rope_theta 1e6
  qwen3_bias         Qwen3ForCausalLM with attention_bias (q/k/v/o biases), untied
  smollm2            LlamaForCausalLM shaped like SmolLM2: tied embeddings, 3 heads over 1 KV head
  mistral            MistralForCausalLM, sliding_window null (Mistral 7B v0.2+), head_dim 32 != 16
  mistral_window_big MistralForCausalLM, sliding_window 4096: longer than any sequence here, no effect
  mistral_window_5   MistralForCausalLM, sliding_window 5 < the 12 (logits) and 29 (generation)
                     tokens: the window masks keys, so Ferry's sliding mask is tested
"""
import pathlib
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen3Config, Qwen3ForCausalLM

from model_llama_ref import PAD, VOCAB, write_causal_lm_reference

COMMON = dict(vocab_size=VOCAB, max_position_embeddings=256, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
              initializer_range=0.2, num_hidden_layers=2)

MODELS = {
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        tie_word_embeddings=True, rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        **COMMON)),
    "qwen3_bias": (Qwen3ForCausalLM, Qwen3Config(
        hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
        attention_bias=True, rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **COMMON)),
    "smollm2": (LlamaForCausalLM, LlamaConfig(
        hidden_size=96, intermediate_size=256, num_attention_heads=3, num_key_value_heads=1, tie_word_embeddings=True,
        rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, **COMMON)),
    "mistral": (MistralForCausalLM, MistralConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        sliding_window=None, rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        **COMMON)),
    "mistral_window_big": (MistralForCausalLM, MistralConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=1,
        sliding_window=4096, rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **COMMON)),
    "mistral_window_5": (MistralForCausalLM, MistralConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        sliding_window=5, rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **COMMON)),
}


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    for seed, (name, (model_class, config)) in enumerate(MODELS.items()):
        torch.manual_seed(400 + seed)
        write_causal_lm_reference(model_class, config, out / name, 10 + seed, random_norms=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
