#!/usr/bin/env python3
"""Data for scripts/demo-real.sh: two-digit addition for SmolLM2-135M-Instruct, written to OUTDIR.

  train.jsonl          {"messages": [system, user, assistant]}: "What is 47 + 38?" -> "85"
  eval_sft.jsonl       the same form, held out (the training loss on unseen questions)
  prompts_eval.jsonl   {"messages": [system, user], "gt_answer": "85"}: held out, for `ferry eval`

Every question uses the system prompt "You are a helpful assistant. Reply with the number only.";
the model as released answers none of them exactly (it explains instead, and its sums are often
wrong), so both the format and the arithmetic are learned. Held-out pairs (a, b) never occur in
training, in either order. Deterministic (seed 2026).

Usage: make_real_demo_data.py OUTDIR [TRAIN_COUNT]
"""
import json
import pathlib
import random
import sys

SYSTEM = "You are a helpful assistant. Reply with the number only."


def conversation(a, b):
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {a} + {b}?"}]


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    train_count = int(sys.argv[2]) if len(sys.argv) > 2 else 6000
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(2026)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    rng.shuffle(pairs)
    held, seen = [], set()
    for a, b in pairs:
        if len(held) == 300:
            break
        if (b, a) not in seen:
            held.append((a, b))
            seen.add((a, b))
    blocked = seen | {(b, a) for a, b in seen}
    train = [p for p in pairs if p not in blocked][:train_count]
    with open(out / "train.jsonl", "w") as f:
        for a, b in train:
            f.write(json.dumps({"messages": conversation(a, b) + [{"role": "assistant", "content": str(a + b)}]}) + "\n")
    with open(out / "eval_sft.jsonl", "w") as f:
        for a, b in held[200:]:
            f.write(json.dumps({"messages": conversation(a, b) + [{"role": "assistant", "content": str(a + b)}]}) + "\n")
    with open(out / "prompts_eval.jsonl", "w") as f:
        for a, b in held[:200]:
            f.write(json.dumps({"messages": conversation(a, b), "gt_answer": str(a + b), "kind": "add"}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
