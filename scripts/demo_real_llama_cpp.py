#!/usr/bin/env python3
"""llama.cpp runs the real-model demo's adapter (scripts/demo-real.sh, when llama-cpp-python is
installed): the released GGUF file with the exported LoRA adapter, greedy chat answers to held-out
additions, exact match, and agreement with `ferry eval`'s answers of the same run.

Usage: demo_real_llama_cpp.py BASE.gguf ADAPTER.gguf FERRY_EVAL.jsonl [LIMIT]
FERRY_EVAL.jsonl is `ferry eval --output` (messages, gt_answer, answer); LIMIT (default 50) rows.
"""
import json
import sys

from llama_cpp import Llama


def main() -> int:
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    base, adapter, ferry_file = sys.argv[1:4]
    limit = int(sys.argv[4]) if len(sys.argv) == 5 else 50
    rows = [json.loads(line) for line in open(ferry_file)][:limit]
    llm = Llama(model_path=base, lora_path=adapter, n_ctx=256, n_threads=2, verbose=False, seed=0)
    right = same = 0
    for row in rows:
        reply = llm.create_chat_completion(messages=row["messages"], temperature=0.0, max_tokens=8)
        answer = reply["choices"][0]["message"]["content"].strip()
        right += answer == row["gt_answer"]
        same += answer == row["answer"].strip()
    n = len(rows)
    print(f"llama.cpp {__import__('llama_cpp').__version__}, {base.rsplit('/', 1)[-1]} + {adapter}: exact match "
          f"{right}/{n} = {100.0 * right / n:.1f}%; the same answer as ferry eval: {same}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
