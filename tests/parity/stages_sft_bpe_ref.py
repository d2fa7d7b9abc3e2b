#!/usr/bin/env python3
"""Model folders for Ferry's end-to-end LoRA SFT with Hugging Face tokenizer.json tokenizers.

Usage: stages_sft_bpe_ref.py OUTDIR. Writes OUTDIR/<family>/model/ for two families, each a tiny
random model saved by transformers together with a byte-level BPE tokenizer trained here with
`tokenizers` on the demo SFT data (the pre-tokenizers of tokenizer_bpe_ref.py) and saved by
PreTrainedTokenizerFast (tokenizer.json + tokenizer_config.json with its special tokens and the
family's chat template):
  qwen2   Qwen2ForCausalLM (attention biases, tied embeddings); ChatML specials, eos <|im_end|>,
          pad <|endoftext|>, no BOS (as Qwen2.5)
  llama3  LlamaForCausalLM with llama3 rope scaling, untied; bos <|begin_of_text|>,
          eos <|eot_id|>, no pad (as Llama 3.2)
"""
import json
import pathlib
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tokenizer_bpe_ref import build_llama3, build_qwen2  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]

QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim"
    " + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")


def sentences():
    out = []
    for line in (ROOT / "data" / "sft_train.jsonl").read_text().splitlines():
        for message in json.loads(line)["messages"]:
            out.append(message["content"])
    return out


def save(tok, folder, model, chat_template, **special):
    model.save_pretrained(folder, safe_serialization=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **special)
    fast.chat_template = chat_template
    fast.save_pretrained(folder)
    return fast


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.manual_seed(77)
    text = sentences()

    qwen_tok = build_qwen2(text)
    vocab = qwen_tok.get_vocab_size(with_added_tokens=True)
    qwen = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=qwen_tok.token_to_id("<|im_end|>"),
        pad_token_id=qwen_tok.token_to_id("<|endoftext|>"), initializer_range=0.1))
    save(qwen_tok, out / "qwen2" / "model", qwen, QWEN2_TEMPLATE,
         eos_token="<|im_end|>", pad_token="<|endoftext|>")

    llama_tok = build_llama3(text)
    vocab = llama_tok.get_vocab_size(with_added_tokens=True)
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        bos_token_id=llama_tok.token_to_id("<|begin_of_text|>"), eos_token_id=llama_tok.token_to_id("<|eot_id|>"),
        initializer_range=0.1))
    save(llama_tok, out / "llama3" / "model", llama, LLAMA3_TEMPLATE,
         bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    print(f"stages_sft_bpe_ref: qwen2 vocab {qwen.config.vocab_size}, llama3 vocab {llama.config.vocab_size} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
