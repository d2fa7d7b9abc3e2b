#!/usr/bin/env python3
"""Input model folders for tests/integration/io_gguf_export_test.cpp (`ferry export --format gguf`),
written by transformers' save_pretrained and the `tokenizers` library (not by Ferry):

  OUTDIR/llama_spm   LlamaForCausalLM, GQA (4 heads, 2 KV heads), llama3 rope scaling (so a
                     rope_freqs tensor), intermediate 80 (down_proj rows not a multiple of 32: the
                     q8_0 fallback to f16), vocab_size 2048 > the 2,000 pieces of data/tokenizer.model
                     (so [PAD] entries), pad id 3, weights scaled up so greedy decoding has clear
                     margins (the llama.cpp check), fp32
  OUTDIR/qwen2_bpe   Qwen2ForCausalLM (q/k/v biases), tied embeddings, bf16, a byte-level BPE
                     tokenizer.json trained with Qwen2's pre-tokenizer (merges in the ["a", "b"]
                     form), specials <|endoftext|> <|im_start|> <|im_end|>, non-special added
                     tokens, tokenizer_config.json with eos/pad tokens and a chat template,
                     vocab_size above the tokenizer's size
  OUTDIR/llama_lora_bpe  LlamaForCausalLM with q/k/v/o biases, linear rope, a Llama 3-style BPE
                     tokenizer (merges rewritten in the older "a b" form, a TemplateProcessing
                     post-processor that adds <|begin_of_text|>), and LoRA adapters on q_proj and
                     v_proj beside the base weights with adapter_config.json: a Ferry LoRA checkpoint
  OUTDIR/gpt2_prefix_space  qwen2_bpe with a GPT-2 pre-tokenizer that adds a prefix space, which
                     no llama.cpp pre-tokenizer matches (an error unless --gguf-pre is given)
"""
import json
import os
import pathlib
import random
import shutil
import sys

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tokenizer_bpe_ref as bpe  # noqa: E402  (the corpus and the family-style tokenizers)

TOKENIZER = HERE.parents[1] / "data" / "tokenizer.model"
CHAT_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def scale_weights(model, factor):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.mul_(factor)


def llama_spm(root):
    torch.manual_seed(3)
    config = LlamaConfig(vocab_size=2048, hidden_size=64, intermediate_size=80, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=3,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 64})
    model = LlamaForCausalLM(config)
    scale_weights(model, 10.0)  # std 0.2: logits with clear argmax margins
    out = root / "llama_spm"
    model.save_pretrained(out)
    (out / "tokenizer.model").write_bytes(TOKENIZER.read_bytes())


def trained(builder, sentences, path):
    tok = builder(sentences)
    tok.save(str(path))
    return json.loads(path.read_text())


def qwen2_bpe(root, sentences):
    out = root / "qwen2_bpe"
    out.mkdir(parents=True, exist_ok=True)
    data = trained(bpe.build_qwen2, sentences, out / "tokenizer.json")
    size = max(max(data["model"]["vocab"].values()), max(t["id"] for t in data["added_tokens"])) + 1
    torch.manual_seed(4)
    config = Qwen2Config(vocab_size=size + 13, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, dtype="bfloat16")
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    scale_weights(model, 10.0)
    model.save_pretrained(out)
    (out / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": {"content": "<|endoftext|>", "special": True},
        "chat_template": CHAT_TEMPLATE, "model_max_length": 512}, ensure_ascii=False))


def llama_lora_bpe(root, sentences):
    out = root / "llama_lora_bpe"
    out.mkdir(parents=True, exist_ok=True)
    data = trained(bpe.build_llama3, sentences, out / "tokenizer.json")
    data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]  # the older "a b" form
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))
    size = max(max(data["model"]["vocab"].values()), max(t["id"] for t in data["added_tokens"])) + 1
    torch.manual_seed(5)
    config = LlamaConfig(vocab_size=size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=128,
                         attention_bias=True, bos_token_id=None, eos_token_id=None,
                         rope_parameters={"rope_type": "linear", "rope_theta": 500000.0, "factor": 4.0})
    LlamaForCausalLM(config).save_pretrained(out)
    weights = load_file(out / "model.safetensors")
    gen = torch.Generator().manual_seed(6)
    rank = 4
    for layer in range(config.num_hidden_layers):
        for proj in ("q_proj", "v_proj"):
            base = weights[f"model.layers.{layer}.self_attn.{proj}.weight"]
            prefix = f"model.layers.{layer}.self_attn.{proj}"
            weights[prefix + ".lora_A.weight"] = torch.randn(rank, base.shape[1], generator=gen) * 0.1
            weights[prefix + ".lora_B.weight"] = torch.randn(base.shape[0], rank, generator=gen) * 0.1
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 8, "lora_dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"], "bias": "none", "base_model_name_or_path": None}))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}))


def gpt2_prefix_space(root):
    out = root / "gpt2_prefix_space"
    shutil.copytree(root / "qwen2_bpe", out, dirs_exist_ok=True)
    data = json.loads((out / "tokenizer.json").read_text())
    data["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    rng = random.Random(7)
    sentences = bpe.split_corpus(bpe.corpus_text(rng, 60_000), rng)
    llama_spm(root)
    qwen2_bpe(root, sentences)
    llama_lora_bpe(root, sentences)
    gpt2_prefix_space(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
