#!/usr/bin/env python3
"""llama.cpp itself (through llama-cpp-python, which scripts/deps.sh installs in the deps venv) on a
GGUF file from `ferry export --format gguf`:

  - tokenization: llama.cpp's tokenizer, driven only by the file's tokenizer.* metadata, gives the
    ids of the source tokenizer (sentencepiece for tokenizer.model, tokenizers for tokenizer.json)
    for a set of texts, special tokens included;
  - logits: llama.cpp's logits for a prompt equal transformers' on the source folder (fp32 export);
  - greedy decoding: 12 argmax tokens from llama.cpp after the prompt equal transformers' greedy
    tokens; and 12 after TEXTS[0] ("the cat") with BOS: the text `ferry generate --greedy` printed
    for that prompt (FERRY_TEXT, a file; "-" to skip) is their text (or its start, when Ferry stopped
    at a stop string).

For a quantized export (f16, bf16, q8_0) pass --tolerance (relative to the largest logit): the
logits must agree within it, and the tokens are compared but only reported (a near tie may flip).

Usage: gguf_llama_cpp_check.py MODEL_DIR FILE.gguf FERRY_TEXT [--tolerance 0.1]
Exit 0: all equal; 1: a difference (printed); 77: llama_cpp is not installed.
"""
import argparse
import pathlib
import sys

import numpy as np
import torch

try:
    from llama_cpp import Llama
except ImportError:
    print("llama_cpp is not installed")
    sys.exit(77)
from transformers import AutoModelForCausalLM

TEXTS = ["the cat", "What is 37 + 48 - 12?", "Hello world!\nSecond line,  two spaces.", "don't stop 12345",
         "<|user|>\nsort 3 1 2<|end|>\n<|assistant|>\n", "<|im_start|>user\nhi<|im_end|>\n"]
NEW_TOKENS = 12


def source_tokenizer(model_dir):
    """(encode(text) -> ids without BOS, decode(ids) -> text, bos id or None)."""
    if (model_dir / "tokenizer.model").is_file():
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=str(model_dir / "tokenizer.model"))
        return sp.encode, sp.decode, sp.bos_id(), sp.eos_id()
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    return (lambda t: tok.encode(t, add_special_tokens=False).ids), tok.decode, None, tok.token_to_id("<|im_end|>")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", type=pathlib.Path)
    parser.add_argument("gguf")
    parser.add_argument("ferry_text")
    parser.add_argument("--tolerance", type=float, default=None)
    args = parser.parse_args()
    model_dir, gguf, ferry_text = args.model_dir, args.gguf, args.ferry_text
    exact = args.tolerance is None
    encode, decode, bos, eos = source_tokenizer(model_dir)
    # An fp32 KV cache (llama.cpp's default is f16), so the logits compare at fp32 precision.
    llm = Llama(model_path=gguf, n_ctx=128, logits_all=True, verbose=False, n_threads=2, seed=0, type_k=0, type_v=0)
    errors, notes = [], []

    for text in TEXTS:
        # special=True: control/user-defined tokens written in the text become their ids, as in the
        # source tokenizers (SentencePiece user-defined pieces; tokenizers' added tokens).
        got = llm.tokenize(text.encode(), add_bos=False, special=True)
        want = encode(text)
        if got != want:
            errors.append(f"tokenize {text!r}: llama.cpp {got}, source {want}")

    # A prompt of ~40 tokens, so that rope (and llama3's low-frequency factors) turn far enough to matter.
    prompt = ([bos] if bos is not None else []) + encode(" ".join(TEXTS[:4]))
    llm.reset()
    llm.eval(prompt)
    llama_logits = np.array(llm.scores[: len(prompt)], dtype=np.float32)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        hf_logits = model(torch.tensor([prompt])).logits[0].numpy()
    diff = float(np.abs(llama_logits - hf_logits).max())
    scale = float(np.abs(hf_logits).max())
    print(f"logits: max |llama.cpp - transformers| = {diff:.2e} (logits up to {scale:.1f})")
    if not diff <= (1e-3 if exact else args.tolerance) * max(1.0, scale):
        errors.append(f"logits differ by {diff}")

    def llama_greedy(ids):
        llm.reset()
        llm.eval(ids)
        out = []
        for _ in range(NEW_TOKENS):
            out.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
            llm.eval([out[-1]])
        return out

    llama_ids = llama_greedy(prompt)
    with torch.no_grad():
        hf_ids = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                                pad_token_id=0)[0, len(prompt):].tolist()
    print(f"greedy: llama.cpp {llama_ids}, transformers {hf_ids}")
    if llama_ids != hf_ids:
        (errors if exact else notes).append(f"greedy tokens differ: llama.cpp {llama_ids}, transformers {hf_ids}")
    if ferry_text != "-":
        printed = pathlib.Path(ferry_text).read_text()
        printed = printed[:-1] if printed.endswith("\n") else printed  # the newline after the text
        short = llama_greedy(([bos] if bos is not None else []) + encode(TEXTS[0]))
        text = decode(short[: short.index(eos)] if eos in short else short)
        print(f"ferry generate: {printed!r}; llama.cpp: {text!r}")
        if not text.startswith(printed) or (not printed and text):
            (errors if exact else notes).append(f"ferry generate printed {printed!r}, llama.cpp's greedy text is {text!r}")
    for e in notes + errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
