#!/usr/bin/env python3
"""A multi-turn game for `rollout.environment` (docs/environments.md), standard library only: the
model guesses a secret number and hears "higher" or "lower" after each guess, as a new user turn.

The secret is the prompt line's "secret" (else its "gt_answer", else 1 + the episode number mod
100). The episode ends when a guess is right, with reward 1 - 0.2 x (wrong guesses before it),
at least 0.2; a turn without a number costs a turn ("Answer with a number."); running out of
turns gives 0. No tools: it works with any chat template, the shipped ones included.
`--delay-ms N` waits N ms before every answer, as a slower environment would (scripts/bench-agent.sh).
"""
import argparse
import json
import re
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=float, default=0.0)
    delay = parser.parse_args().delay_ms / 1000.0
    games = {}  # episode -> [secret, wrong guesses]
    for line in sys.stdin:
        request = json.loads(line)
        episode = request["episode"]
        kind = request["type"]
        if kind == "reset":
            prompt = request["prompt"]
            secret = prompt.get("secret", prompt.get("gt_answer")) if isinstance(prompt, dict) else None
            try:
                secret = int(secret)
            except (TypeError, ValueError):
                secret = 1 + episode % 100
            games[episode] = [secret, 0]
            reply = {}
        elif kind == "step":
            game = games[episode]
            numbers = re.findall(r"-?\d+", request["message"]["content"])
            if not numbers:
                game[1] += 1
                reply = {"messages": [{"role": "user", "content": "Answer with a number."}]}
            elif int(numbers[-1]) == game[0]:
                reply = {"done": True, "reward": max(0.2, 1.0 - 0.2 * game[1])}
                del games[episode]
            else:
                game[1] += 1
                hint = "higher" if int(numbers[-1]) < game[0] else "lower"
                reply = {"messages": [{"role": "user", "content": hint}]}
        else:  # end: out of turns or tokens
            games.pop(episode, None)
            reply = {"reward": 0.0}
        if delay > 0:
            time.sleep(delay)
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
