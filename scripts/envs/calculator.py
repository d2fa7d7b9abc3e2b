#!/usr/bin/env python3
"""A calculator tool task for `rollout.environment` (docs/environments.md), standard library only.

Each prompt line asks an arithmetic question and carries its answer in "gt_answer". The model may
call the tool `calculator` with {"expression": "12 * (3 + 4)"} any number of times; each call is
answered with a `tool` message holding the result (or the error). An assistant turn without a tool
call is the final answer: the episode ends with reward 1 when its last number equals gt_answer,
else 0. A tool call that did not parse ends the episode with reward -0.5 (the penalty is the
environment's to choose; `--invalid-reward` sets it). `--reply-as user` gives each result as a user
message ("Result: 8") instead of a tool message and sends no tool list at reset, for chat templates
that render neither (the shipped YAML ones; the demo of scripts/agent-learns.sh, whose model learned
the call format in SFT). Run it by hand to try it:

    echo '{"type":"reset","episode":0,"prompt":{"messages":[{"role":"user","content":"2+2?"}],"gt_answer":"4"}}' \
      | python3 scripts/envs/calculator.py
"""
import argparse
import ast
import json
import operator
import re
import sys

TOOLS = [{
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluates an arithmetic expression (+, -, *, /, parentheses) and returns the result.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 12 * (3 + 4)"}},
            "required": ["expression"],
        },
    },
}]

OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.USub: operator.neg, ast.UAdd: operator.pos}


def evaluate(expression):
    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](walk(node.operand))
        raise ValueError("only numbers, + - * / and parentheses are allowed")
    value = walk(ast.parse(str(expression), mode="eval"))
    return int(value) if float(value).is_integer() else round(value, 6)


def last_number(text):
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    return float(numbers[-1]) if numbers else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reply-as", choices=["tool", "user"], default="tool")
    parser.add_argument("--invalid-reward", type=float, default=-0.5)
    options = parser.parse_args()
    answers = {}  # episode -> gt_answer
    for line in sys.stdin:
        request = json.loads(line)
        episode = request["episode"]
        kind = request["type"]
        if kind == "reset":
            answers[episode] = str(request["prompt"].get("gt_answer", ""))
            reply = {"tools": TOOLS} if options.reply_as == "tool" else {}
        elif kind == "step":
            message = request["message"]
            if request.get("invalid_tool_calls"):
                reply = {"done": True, "reward": options.invalid_reward, "info": {"why": "malformed tool call"}}
            elif message.get("tool_calls"):
                results = []
                for call in message["tool_calls"]:
                    function = call["function"]
                    try:
                        if function["name"] != "calculator":
                            raise ValueError("unknown tool " + function["name"])
                        content = str(evaluate(function["arguments"].get("expression", "")))
                    except Exception as error:  # the model sees the error and may try again
                        content = "error: " + str(error)
                    results.append({"role": "tool", "name": function["name"], "tool_call_id": call["id"],
                                    "content": content})
                if options.reply_as == "user":
                    results = [{"role": "user", "content": "\n".join("Result: " + r["content"] for r in results)}]
                reply = {"messages": results}
            else:
                got, want = last_number(message["content"]), last_number(answers.get(episode, ""))
                reply = {"done": True, "reward": 1.0 if got is not None and want is not None and abs(got - want) < 1e-6 else 0.0}
        else:  # end: the episode ran out of turns or tokens
            reply = {"reward": 0.0}
        if kind != "reset" and (reply.get("done") or kind == "end"):
            answers.pop(episode, None)
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
