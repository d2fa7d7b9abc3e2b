#!/usr/bin/env python3
"""Input model folders for tests/integration/io_export_test.cpp, written by transformers'
save_pretrained (not by Ferry):

  OUTDIR/llama_f32   GQA, untied, linear rope, ~3 MiB of fp32 weights (so 1 MiB shards give >= 3),
                     with tokenizer.model (data/tokenizer.model), tokenizer_config.json and
                     generation_config.json beside it
  OUTDIR/tied_bf16   tied embeddings, q/k/v/o biases, bf16
"""
import json
import pathlib
import sys

import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
