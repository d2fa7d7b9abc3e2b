#!/usr/bin/env python3
"""A scripted environment for the multi-turn tests (docs/environments.md's protocol): each prompt
line carries an "env" object saying what to answer.

  "reset": {...}            the answer to reset (default {})
  "steps": [{...}, ...]     the answer to step k (1-based) is steps[k - 1]; past the list:
                            {"done": true, "reward": <"reward", default 0>}
  "end_reward": x           the answer to end is {"reward": x} (default 0)
  "sleep_ms": n             wait before every answer
  "fault": {"step2": "crash" | "hang" | "garbage" | "error" | "reset": ...}
                            misbehave instead of answering that request ("reset", "step<k>", "end")
  "log": "path"             append every request received, as a JSON line
"""
import json
import sys
import time

prompts = {}
for line in sys.stdin:
    request = json.loads(line)
    episode, kind = request["episode"], request["type"]
    if kind == "reset":
        prompts[episode] = request["prompt"].get("env", {})
    spec = prompts.get(episode, {})
    if spec.get("log"):
        with open(spec["log"], "a") as log:
            log.write(json.dumps(request) + "\n")
    key = kind + (str(request["turn"]) if kind == "step" else "")
    fault = spec.get("fault", {}).get(key)
    time.sleep(spec.get("sleep_ms", 0) / 1000.0)
    if fault == "crash":
        print("scripted_env: crashing as asked at " + key, file=sys.stderr, flush=True)
        sys.exit(3)
    if fault == "hang":
        time.sleep(3600)
    if fault == "garbage":
        print("this is not json", flush=True)
        continue
    if fault == "error":
        print(json.dumps({"error": "asked to fail at " + key}), flush=True)
        continue
    if kind == "reset":
        answer = spec.get("reset", {})
    elif kind == "step":
        steps = spec.get("steps", [])
        turn = request["turn"]
        answer = steps[turn - 1] if turn <= len(steps) else {"done": True, "reward": spec.get("reward", 0)}
    else:
        answer = {"reward": spec.get("end_reward", 0)}
    print(json.dumps(answer), flush=True)
