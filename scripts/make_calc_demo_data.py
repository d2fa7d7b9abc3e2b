#!/usr/bin/env python3
"""The calculator demo's data (scripts/agent-learns.sh): arithmetic the tiny demo model cannot do in
its head (two-digit by one-digit products, three-digit sums and differences), and a calculator tool
it can call in Hermes' format, answered as a user turn ("Result: N") because the demo template
renders no tool role (scripts/envs/calculator.py --reply-as user).

  data/calc_sft.jsonl            4000 conversations: a quarter call the tool (question, the call,
                                 "Result: N", the answer), the rest answer at once (the right answer)
  data/calc_prompts_train.jsonl  2000 questions with gt_answer, for RL
  data/calc_prompts_eval.jsonl   200 held-out questions

Usage: make_calc_demo_data.py [OUT_DIR]  (default: data/). Deterministic (seed 37).
"""
import json
import pathlib
import random
import sys


def question(rng):
    kind = rng.choice(["mul", "add", "sub"])
    if kind == "mul":
        a, b = rng.randint(12, 99), rng.randint(3, 9)
        return f"{a} * {b}", a * b
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    if kind == "add":
        return f"{a} + {b}", a + b
    a, b = max(a, b), min(a, b)
    return f"{a} - {b}", a - b


def call(expression):
    return ('<tool_call>{"name": "calculator", "arguments": {"expression": "' + expression + '"}}</tool_call>')


def main() -> int:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "data")
    rng = random.Random(37)
    seen = set()

    def fresh():
        while True:
            expression, value = question(rng)
            if expression not in seen:
                seen.add(expression)
                return expression, value

    eval_lines = [fresh() for _ in range(200)]
    train_lines = [fresh() for _ in range(2000)]
    with open(out / "calc_sft.jsonl", "w") as f:
        for i in range(4000):
            expression, value = question(rng)
            if expression in {e for e, _ in eval_lines}:
                continue
            messages = [{"role": "user", "content": f"What is {expression}?"}]
            if i % 4 == 0:
                messages += [{"role": "assistant", "content": call(expression)},
                             {"role": "user", "content": f"Result: {value}"}]
            messages.append({"role": "assistant", "content": str(value)})
            f.write(json.dumps({"messages": messages}) + "\n")
    for name, lines in [("calc_prompts_train.jsonl", train_lines), ("calc_prompts_eval.jsonl", eval_lines)]:
        with open(out / name, "w") as f:
            for expression, value in lines:
                f.write(json.dumps({"messages": [{"role": "user", "content": f"What is {expression}?"}],
                                    "gt_answer": str(value), "kind": "calc"}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
