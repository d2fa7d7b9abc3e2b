#!/usr/bin/env python3
"""An example reward command for `rewards: [{kind: command, command: "python3 scripts/reward-exact-match.py"}]`.

Ferry starts it once and writes one JSON line per sampled response on stdin:
    {"prompt": "What is 2 + 3?", "response": "5", "gt_answer": "5"}
("gt_answer" only when the prompt has one). It must answer each line with one number on its own line on
stdout, in order, and flush. This one gives 1.0 when the response (stripped of whitespace and of the demo
template's end-of-turn marker) equals gt_answer, else 0.0: the same as `kind: verifier, match: exact`.
Standard library only.
"""
import json
import sys

END_MARKER = "<|end|>"


def score(request: dict) -> float:
    answer = request.get("gt_answer")
    if answer is None:
        return 0.0
    response = request["response"].strip()
    if response.endswith(END_MARKER):
        response = response[: -len(END_MARKER)].strip()
    return 1.0 if response == answer else 0.0


def main() -> None:
    for line in sys.stdin:
        print(score(json.loads(line)), flush=True)


if __name__ == "__main__":
    main()
