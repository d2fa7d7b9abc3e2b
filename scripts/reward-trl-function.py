#!/usr/bin/env python3
"""A TRL reward function run as a Ferry reward command, behind the three-line wrapper docs/data.md shows:
`rewards: [{kind: command, command: "python3 scripts/reward-trl-function.py"}]`.

TRL calls a reward function with the batch's prompts, its completions (text, or for conversational
prompts [{"role": "assistant", "content": ...}]) and every other dataset column as a keyword list.
Ferry writes one JSON line per answer whose "row" holds the prompt row's columns and whose
"completion" is the answer as TRL gives it, so the loop at the bottom is all a port needs.
accuracy_reward here is TRL-style exact match against the rows' gt_answer column (1.0 or 0.0, after
the demo template's end-of-turn marker): the same as `kind: verifier, match: exact`.
Standard library only.
"""
import json
import sys


def accuracy_reward(prompts, completions, gt_answer=None, **kwargs):
    answers = gt_answer or [None] * len(completions)
    rewards = []
    for completion, answer in zip(completions, answers):
        text = completion[0]["content"] if isinstance(completion, list) else completion
        text = text.strip()
        if text.endswith("<|end|>"):
            text = text[: -len("<|end|>")].strip()
        rewards.append(1.0 if answer is not None and text == answer else 0.0)
    return rewards


for line in sys.stdin:
    r = json.loads(line); row = r["row"]
    print(accuracy_reward(prompts=[row.get("prompt", r["prompt"])], completions=[r["completion"]],
                          **{k: [v] for k, v in row.items() if k != "prompt"})[0], flush=True)
