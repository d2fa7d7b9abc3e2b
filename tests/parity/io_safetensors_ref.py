#!/usr/bin/env python3
"""Reference files for tests/parity/io_safetensors_parity_test.cpp, written by the Python
`safetensors` and `transformers` packages (not by Ferry).

Writes into OUTDIR:
  dtypes.safetensors      safetensors.torch.save_file of one tensor per dtype (incl. bf16, fp8,
                          bool, a scalar and an empty tensor), metadata {"source": "python"}
  dtypes.json             per tensor: dtype name, shape, values as float64 (exact for every dtype)
  llama_sharded/          a tiny random LlamaForCausalLM (GQA, llama3 rope) saved by
                          save_pretrained(max_shard_size=...) -> index + several shards
  llama_sharded.json      per weight: shape and values; the model's config as transformers sees it
  configs/<case>/config.json + configs.json
                          config.json files as found in the wild (legacy rope_scaling, transformers 5
                          rope_parameters, qwen2, qwen3, SmolLM2, mistral) with the values transformers
                          reads from them (shapes, biases and q/k norms of the model it builds)
"""
import json
import pathlib
import sys

import torch
from safetensors.torch import save_file


def values(t: torch.Tensor) -> list:
    return t.detach().to(torch.float64).flatten().tolist()


def write_dtypes(out: pathlib.Path) -> None:
    base = torch.linspace(-3.0, 3.0, 24, dtype=torch.float64).reshape(2, 3, 4)
    tensors = {
        "f64": base.clone(),
        "f32": base.to(torch.float32) / 7,
        "f16": (base / 3).to(torch.float16),
        "bf16": (base * 1.1).to(torch.bfloat16),
        "f8_e4m3": base.to(torch.float8_e4m3fn),
        "f8_e5m2": base.to(torch.float8_e5m2),
        "i64": (torch.arange(10, dtype=torch.int64) - 5) * (2**40),
        "i32": (torch.arange(7, dtype=torch.int32) - 3) * 100000,
        "i16": torch.arange(-300, 300, 50, dtype=torch.int16),
        "i8": torch.arange(-128, 128, 17, dtype=torch.int8),
        "u8": torch.arange(0, 256, 15, dtype=torch.int64).to(torch.uint8),
        "bool": torch.tensor([True, False, False, True, True]),
        "scalar": torch.tensor(3.25, dtype=torch.float32),
        "empty": torch.zeros(0, 5, dtype=torch.bfloat16),
    }
    save_file(tensors, str(out / "dtypes.safetensors"), metadata={"source": "python"})
    names = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2", torch.int64: "I64", torch.int32: "I32",
             torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}
    expected = {name: {"dtype": names[t.dtype], "shape": list(t.shape), "values": values(t)} for name, t in tensors.items()}
    (out / "dtypes.json").write_text(json.dumps(expected))


def write_sharded_llama(out: pathlib.Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=[2, 3],
                         rope_parameters={"rope_type": "llama3", "rope_theta": 50000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 64})
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(out / "llama_sharded", max_shard_size="20KB")
    shards = sorted(p.name for p in (out / "llama_sharded").glob("model-*.safetensors"))
    assert len(shards) >= 3, shards
    weights = {name: {"shape": list(t.shape), "values": values(t)} for name, t in model.state_dict().items()}
    expected = {"weights": weights, "shards": shards, "config": {
        "vocab_size": 96, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": model.config.num_key_value_heads, "head_dim": model.config.head_dim,
        "rope_theta": model.config.rope_parameters["rope_theta"], "rope_type": model.config.rope_parameters["rope_type"],
        "factor": model.config.rope_parameters["factor"],
        "original_max_position_embeddings": model.config.rope_parameters["original_max_position_embeddings"],
        "eos_token_id": model.config.eos_token_id}}
    (out / "llama_sharded.json").write_text(json.dumps(expected))


# config.json texts as published (older transformers / other tools), checked against what
# transformers itself reads from them.
HAND_WRITTEN_CONFIGS = {
    "llama31_legacy": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009], "attention_bias": False, "mlp_bias": False, "hidden_act": "silu"},
    "linear_legacy": {
        "model_type": "llama", "vocab_size": 32000, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 8, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0},
        "pad_token_id": 0, "torch_dtype": "float16", "attention_bias": True},
    "qwen2": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
        "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
        "use_sliding_window": False, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu"},
    "qwen3_0_6b": {  # head_dim 128 != hidden / heads (64); q/k norms
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
        "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
        "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
        "vocab_size": 151936},
    "qwen3_defaults": {  # Qwen3Config's head_dim default is 128, not hidden / heads; its KV heads 32
        "model_type": "qwen3", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 64, "attention_bias": True, "torch_dtype": "float32"},
    "smollm2_135m": {  # a tied Llama
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0,
        "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576, "initializer_range": 0.041666666666666664,
        "intermediate_size": 1536, "is_llama_config": True, "max_position_embeddings": 8192, "mlp_bias": False,
        "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_interleaved": False, "rope_scaling": None,
        "rope_theta": 100000, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 49152},
    "mistral_7b_v01": {  # a 4096-token sliding window
        "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
        "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
        "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32000},
    "mistral_nemo": {  # no sliding window; head_dim 128 != hidden / heads (160)
        "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 14336, "max_position_embeddings": 1024000,
        "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 131072},
    "mistral_defaults": {  # no sliding_window key: MistralConfig's default window applies; 8 KV heads
        "model_type": "mistral", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 16, "torch_dtype": "float32"},
}


def write_configs(out: pathlib.Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

    cases = dict(HAND_WRITTEN_CONFIGS)
    # Saved by transformers 5 itself: rope_parameters form, head_dim different from hidden/heads.
    saved = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                        num_attention_heads=4, num_key_value_heads=1, head_dim=32, max_position_embeddings=512,
                        rope_parameters={"rope_type": "linear", "rope_theta": 20000.0, "factor": 4.0},
                        tie_word_embeddings=True, pad_token_id=5, dtype="bfloat16")
    cases["transformers5_saved"] = json.loads(saved.to_json_string())
    expected = {}
    for case, data in cases.items():
        folder = out / "configs" / case
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(data, indent=2))
        c = AutoConfig.from_pretrained(folder)
        rope = c.rope_parameters
        eos = c.eos_token_id
        with torch.device("meta"):  # the model transformers builds: its biases, norms and head size
            layer = AutoModelForCausalLM.from_config(c).model.layers[0]
        attn, mlp = layer.self_attn, layer.mlp
        expected[case] = {
            "model_type": c.model_type, "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
            "intermediate_size": c.intermediate_size, "num_hidden_layers": c.num_hidden_layers,
            "num_attention_heads": c.num_attention_heads, "num_key_value_heads": c.num_key_value_heads,
            "head_dim": attn.q_proj.out_features // c.num_attention_heads,
            "max_position_embeddings": c.max_position_embeddings, "rms_norm_eps": c.rms_norm_eps,
            "rope_theta": rope["rope_theta"], "rope_type": rope["rope_type"], "factor": rope.get("factor", 1.0),
            "low_freq_factor": rope.get("low_freq_factor"), "high_freq_factor": rope.get("high_freq_factor"),
            "original_max_position_embeddings": rope.get("original_max_position_embeddings"),
            "tie_word_embeddings": c.tie_word_embeddings,
            "attention_bias": attn.q_proj.bias is not None,
            "attention_output_bias": attn.o_proj.bias is not None,
            "mlp_bias": mlp.up_proj.bias is not None,
            "qk_norm": hasattr(attn, "q_norm"),
            "sliding_window": getattr(c, "sliding_window", None) or 0,  # qwen2/3: None unless use_sliding_window
            "bos_token_id": -1 if c.bos_token_id is None else c.bos_token_id,
            "eos_token_ids": [] if eos is None else (eos if isinstance(eos, list) else [eos]),
            "pad_token_id": -1 if c.pad_token_id is None else c.pad_token_id,
            "dtype": str(c.dtype).replace("torch.", ""),
        }
    (out / "configs.json").write_text(json.dumps(expected, indent=2))


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    write_dtypes(out)
    write_sharded_llama(out)
    write_configs(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
