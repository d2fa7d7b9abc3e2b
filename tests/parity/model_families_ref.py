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
The newer families below all have sliding_window 5 where they have one (< 12 and 29 tokens), and
every Gemma norm weight w (applied as 1 + w, initialised to 0) random around 0:
  gemma2             Gemma2ForCausalLM, 3 layers sliding/full/sliding, attention and final logit
                     softcapping low enough to change the logits (ATTN_SOFTCAP, FINAL_SOFTCAP),
                     query_pre_attn_scalar 24 != head_dim 32 != hidden/heads 16, gelu_pytorch_tanh,
                     sandwich norms (pre/post attention and feed-forward), sqrt(hidden) embedding
                     scale, tied embeddings (drawn smaller: EMBEDDING_SCALE)
  gemma3             Gemma3ForCausalLM (Gemma3TextConfig): per-head q/k norms, 3 layers sliding/
                     sliding/full, full layers rope_theta 1e6 with linear scaling (factor 2), sliding
                     layers rope_theta 1e4, query_pre_attn_scalar 48 != head_dim 32, 1 KV head, tied
                     (EMBEDDING_SCALE)
  smollm3            SmolLM3ForCausalLM, no_rope_layers [1, 1, 0]: layer 2 has no RoPE (NoPE), tied
  olmo2              Olmo2ForCausalLM: post-norms only (after attention and MLP, none before), q/k
                     RMSNorms over the whole q and k projections (64 and 32 wide with GQA), untied
  olmo3              Olmo3ForCausalLM: as OLMo 2, plus 3 layers sliding/sliding/full
  olmo3_yarn         Olmo3ForCausalLM as olmo3 with YaRN (factor 4) on the full-attention layer only,
                     as OLMo 3's long-context checkpoints have (the sliding layers keep plain RoPE)
  phi3               Phi3ForCausalLM shaped like Phi-4 (14B): fused qkv_proj and gate_up_proj, GQA,
                     no sliding window, plain RoPE, untied
  phi3_longrope      Phi3ForCausalLM shaped like Phi-3-mini-128k / Phi-4-mini: LongRoPE with random
                     short and long factors, original_max_position_embeddings 16 of 64 (attention
                     factor sqrt(1 + ln 4 / ln 16)), partial_rotary_factor 0.5, sliding_window 5, tied:
                     the 12-token logits use the short factors, generation crosses to the long ones
                     at position 16 (transformers switches per forward, on max(position_ids) + 1)
  phi3_long_context  as phi3_longrope with original_max_position_embeddings 8: the logits already
                     use the long factors
For gemma3, olmo3 and olmo3_yarn, logits.safetensors also has inv_freq_<layer type> and
rope_scaling_<layer type> (see model_llama_ref.rope_frequencies); inv_freq is the full layers'.
"""
import pathlib
import sys

import torch
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig,
                          LlamaForCausalLM, MistralConfig, MistralForCausalLM, Olmo2Config, Olmo2ForCausalLM, Olmo3Config,
                          Olmo3ForCausalLM, Phi3Config, Phi3ForCausalLM, Qwen3Config, Qwen3ForCausalLM, SmolLM3Config,
                          SmolLM3ForCausalLM)

from model_llama_ref import PAD, VOCAB, random_causal_lm, write_causal_lm_reference

COMMON = dict(vocab_size=VOCAB, max_position_embeddings=256, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
              initializer_range=0.2, num_hidden_layers=2)
COMMON3 = {**COMMON, "num_hidden_layers": 3}

# Gemma 2's tanh softcaps (real Gemma 2: 50 and 30), low enough for these tiny weights: the attention
# scores reach ~10 and the logits ~1.7 uncapped; dropping the attention cap changes the fp32 logits
# by 0.55, dropping the final one by 0.76.
ATTN_SOFTCAP = 5.0
FINAL_SOFTCAP = 1.0

# Gemma multiplies its (tied) embeddings by sqrt(hidden) = 8: drawn with std 0.2 they outweigh every
# layer's output and the model repeats one token in generation, so Gemma's embedding is scaled by
# this factor after its random init (std 0.05).
EMBEDDING_SCALE = {"gemma2": 0.25, "gemma3": 0.25}

# LongRoPE's per-frequency divisors for a rotary width of 8 (head_dim 16, partial_rotary_factor 0.5):
# short ones near 1 as Phi-3's are, long ones growing with the wavelength.
SHORT_FACTORS = [1.0, 1.05, 1.2, 1.5]
LONG_FACTORS = [1.0, 2.5, 6.0, 11.0]


def phi3_longrope(original_context):
    return Phi3Config(
        hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, sliding_window=5,
        tie_word_embeddings=True, rms_norm_eps=1e-5, original_max_position_embeddings=original_context,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                         "short_factor": SHORT_FACTORS, "long_factor": LONG_FACTORS},
        **{**COMMON, "max_position_embeddings": 64})


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
    "gemma2": (Gemma2ForCausalLM, Gemma2Config(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        query_pre_attn_scalar=24, hidden_activation="gelu_pytorch_tanh", sliding_window=5,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        attn_logit_softcapping=ATTN_SOFTCAP, final_logit_softcapping=FINAL_SOFTCAP, tie_word_embeddings=True,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **COMMON3)),
    "gemma3": (Gemma3ForCausalLM, Gemma3TextConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=1, head_dim=32,
        query_pre_attn_scalar=48, hidden_activation="gelu_pytorch_tanh", sliding_window=5,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"], tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        **COMMON3)),
    "smollm3": (SmolLM3ForCausalLM, SmolLM3Config(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, no_rope_layers=[1, 1, 0],
        tie_word_embeddings=True, rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 2e6},
        **COMMON3)),
    "olmo2": (Olmo2ForCausalLM, Olmo2Config(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        tie_word_embeddings=False, rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        **COMMON)),
    "olmo3": (Olmo3ForCausalLM, Olmo3Config(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, sliding_window=5,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"], tie_word_embeddings=False,
        rms_norm_eps=1e-6, rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 500000.0},
                                            "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}},
        **COMMON3)),
    "olmo3_yarn": (Olmo3ForCausalLM, Olmo3Config(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, sliding_window=5,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"], tie_word_embeddings=False,
        rms_norm_eps=1e-6,
        rope_parameters={"full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 4.0,
                                            "original_max_position_embeddings": 64, "beta_fast": 32.0,
                                            "beta_slow": 1.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}},
        **COMMON3)),
    "phi3": (Phi3ForCausalLM, Phi3Config(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, sliding_window=None,
        tie_word_embeddings=False, rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 250000.0},
        **COMMON)),
    "phi3_longrope": (Phi3ForCausalLM, phi3_longrope(16)),
    "phi3_long_context": (Phi3ForCausalLM, phi3_longrope(8)),
}


def build_model(name):
    """The random model `name` of MODELS, the same on every call (model_families_train_ref.py rebuilds
    them): each is drawn from its own seed, 400 + its index in MODELS."""
    model_class, config = MODELS[name]
    torch.manual_seed(400 + list(MODELS).index(name))
    model = random_causal_lm(model_class, config, random_norms=True)
    if name in EMBEDDING_SCALE:
        with torch.no_grad():
            model.model.embed_tokens.weight.mul_(EMBEDDING_SCALE[name])
    return model


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    for seed, (name, (model_class, config)) in enumerate(MODELS.items()):
        write_causal_lm_reference(model_class, config, out / name, 10 + seed, model=build_model(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
