#!/usr/bin/env python3
"""Input model folders for tests/integration/io_export_test.cpp, written by transformers'
save_pretrained (not by Ferry):

  OUTDIR/llama_f32   GQA, untied, linear rope, ~3 MiB of fp32 weights (so 1 MiB shards give >= 3),
                     with tokenizer.model (data/tokenizer.model), tokenizer_config.json and
                     generation_config.json beside it
  OUTDIR/tied_bf16   tied embeddings, q/k/v/o biases, bf16
  OUTDIR/qwen3       Qwen3ForCausalLM: q/k norms (random around 1), head_dim 32 != hidden/heads, tied
  OUTDIR/mistral     MistralForCausalLM with sliding_window 6, head_dim 32 != hidden/heads
"""
import json
import pathlib
import sys

import torch
from transformers import (GenerationConfig, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

TOKENIZER = pathlib.Path(__file__).resolve().parents[2] / "data" / "tokenizer.model"


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=2048, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         rope_parameters={"rope_type": "linear", "rope_theta": 20000.0, "factor": 2.0})
    model = LlamaForCausalLM(config)
    model.save_pretrained(root / "llama_f32")
    GenerationConfig(max_new_tokens=7, do_sample=False).save_pretrained(root / "llama_f32")
    (root / "llama_f32" / "tokenizer.model").write_bytes(TOKENIZER.read_bytes())
    (root / "llama_f32" / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True}))

    torch.manual_seed(2)
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                         tie_word_embeddings=True, attention_bias=True, dtype="bfloat16")
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(root / "tied_bf16")

    torch.manual_seed(3)
    config = Qwen3Config(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True,
                         max_position_embeddings=128)
    qwen3 = Qwen3ForCausalLM(config)
    with torch.no_grad():
        for name, parameter in qwen3.named_parameters():
            if name.endswith("norm.weight"):
                parameter.copy_(1.0 + 0.3 * torch.randn_like(parameter))
    qwen3.save_pretrained(root / "qwen3")

    torch.manual_seed(4)
    config = MistralConfig(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=1, head_dim=32, sliding_window=6,
                           max_position_embeddings=128)
    MistralForCausalLM(config).save_pretrained(root / "mistral")
    return 0


if __name__ == "__main__":
    sys.exit(main())
