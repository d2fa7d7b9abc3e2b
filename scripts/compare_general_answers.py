#!/usr/bin/env python3
"""How a tuned model answers everyday questions it was not tuned for, beside the released model.

Usage: compare_general_answers.py BEFORE.jsonl AFTER.jsonl [SHOW]
Both files are `ferry generate --prompts general_prompts.jsonl --greedy --output ...` results, in
the same order. Prints how many answers are a bare number (the failure rehearsal prevents), how
many are word for word the released model's, and SHOW (default 3) questions side by side.
"""
import json
import re
import sys


def answers(path):
    return [(row["messages"][-1]["content"], row["completion"].strip()) for row in map(json.loads, open(path))]


def main() -> int:
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    before, after = answers(sys.argv[1]), answers(sys.argv[2])
    if [q for q, _ in before] != [q for q, _ in after]:
        raise SystemExit(f"{sys.argv[1]} and {sys.argv[2]} answer different questions")
    bare = lambda rows: sum(bool(re.fullmatch(r"[-+]?[\d.,\s]+", a)) for _, a in rows)
    same = sum(a == b for (_, a), (_, b) in zip(before, after))
    n = len(before)
    print(f"everyday questions: {n}; bare-number answers: before {bare(before)}/{n}, after {bare(after)}/{n}; "
          f"after word for word as before: {same}/{n}")
    for (question, old), (_, new) in list(zip(before, after))[: int(sys.argv[3]) if len(sys.argv) == 4 else 3]:
        print(f"  Q: {question}\n     before: {old[:160]!r}\n     after:  {new[:160]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
