#!/usr/bin/env python3
"""The table scripts/ppo-learns.sh prints: per PPO run folder (result.json, metrics.jsonl) the
held-out mean reward and exact match before and after, the last rollout's KL, and their means."""
import json
import pathlib
import sys


def main() -> int:
    rows = []
    for folder in map(pathlib.Path, sys.argv[1:]):
        figures = json.loads((folder / "result.json").read_text())["figures"]
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
        before, after = figures["eval_before"], figures["eval_after"]
        rows.append((folder.name, before["mean_reward"], after["mean_reward"], before["accuracy"], after["accuracy"],
                     metrics[-1]["kl"]))
    print(f"{'run':<10} {'reward before':>14} {'reward after':>13} {'exact before':>13} {'exact after':>12} {'KL (last)':>10}")
    for name, rb, ra, eb, ea, kl in rows:
        print(f"{name:<10} {rb:>14.4f} {ra:>13.4f} {100 * eb:>12.1f}% {100 * ea:>11.1f}% {kl:>10.4f}")
    n = len(rows)
    mean = [sum(r[i] for r in rows) / n for i in range(1, 6)]
    print(f"{'mean':<10} {mean[0]:>14.4f} {mean[1]:>13.4f} {100 * mean[2]:>12.1f}% {100 * mean[3]:>11.1f}% {mean[4]:>10.4f}")
    gained = mean[1] > mean[0] and mean[3] > mean[2]
    print("PPO raised mean reward and exact match over the SFT model" if gained
          else "PPO did NOT raise both mean reward and exact match over the SFT model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
