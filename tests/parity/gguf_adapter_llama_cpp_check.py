#!/usr/bin/env python3
"""llama.cpp itself (through llama-cpp-python, which scripts/deps.sh installs) applies a GGUF LoRA
adapter from `ferry export --format gguf --lora adapter`: the base model with the adapter
(`Llama(model_path=BASE.gguf, lora_path=ADAPTER.gguf)`) gives the logits of the model Ferry merged
(`Llama(model_path=MERGED.gguf)`) for a prompt of token ids, within --tolerance relative to the
largest logit, and the same greedy tokens. As a control, the base without the adapter must differ
from the merged model by far more than that (else the check could not tell an adapter that was
ignored).

Usage: gguf_adapter_llama_cpp_check.py BASE.gguf ADAPTER.gguf MERGED.gguf [--tolerance 1e-4]
Exit 0: equal; 1: a difference (printed); 77: llama_cpp is not installed.
"""
import argparse
import sys

import numpy as np

try:
    from llama_cpp import Llama
except ImportError:
    print("llama_cpp is not installed")
    sys.exit(77)

NEW_TOKENS = 12


def load(path, lora=None):
    # An fp32 KV cache (llama.cpp's default is f16), so the logits compare at fp32 precision.
    return Llama(model_path=path, lora_path=lora, n_ctx=128, logits_all=True, verbose=False, n_threads=2, seed=0,
                 type_k=0, type_v=0)


def logits_and_greedy(llm, prompt):
    llm.reset()
    llm.eval(prompt)
    logits = np.array(llm.scores[: len(prompt)], dtype=np.float64)
    out = []
    for _ in range(NEW_TOKENS):
        out.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        llm.eval([out[-1]])
    return logits, out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("adapter")
    parser.add_argument("merged")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()

    merged = load(args.merged)
    n_vocab = merged.n_vocab()
    prompt = [(7 + 37 * i) % n_vocab for i in range(40)]  # ids, not text: the tokenizer is not under test
    want, want_ids = logits_and_greedy(merged, prompt)
    del merged
    adapted_logits, adapted_ids = logits_and_greedy(load(args.base, args.adapter), prompt)
    base_logits, _ = logits_and_greedy(load(args.base), prompt)

    scale = float(np.abs(want).max())
    diff = float(np.abs(adapted_logits - want).max())
    control = float(np.abs(base_logits - want).max())
    print(f"logits over {len(prompt)} positions: max |base + adapter - merged| = {diff:.3g} "
          f"({diff / max(1.0, scale):.3g} of the largest logit {scale:.3g}); base alone differs by {control:.3g}")
    print(f"greedy: base + adapter {adapted_ids}, merged {want_ids}")
    errors = []
    if not diff <= args.tolerance * max(1.0, scale):
        errors.append(f"base + adapter and merged logits differ by {diff:.3g}")
    # The adapter's own effect must dwarf both the error seen and the tolerance allowed, so that
    # an adapter llama.cpp ignored could not pass.
    if not (control > 100 * diff and control > 10 * args.tolerance * max(1.0, scale)):
        errors.append(f"the adapter changes the logits too little to be checked ({control:.3g})")
    if adapted_ids != want_ids:
        errors.append(f"greedy tokens differ: base + adapter {adapted_ids}, merged {want_ids}")
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
