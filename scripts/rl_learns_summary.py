#!/usr/bin/env python3
"""The table scripts/ppo-learns.sh and scripts/grpo-learns.sh print: per RL run folder (result.json,
metrics.jsonl) the held-out exact match before and after (and the mean reward-model score, when the run
had a reward model), the last rollout's KL when it had a reference, and their means over the runs.

Usage: rl_learns_summary.py RUN_FOLDER... ; exits 0 either way and says whether training helped."""
import json
import math
import pathlib
import sys


def main() -> int:
    rows = []
    for folder in map(pathlib.Path, sys.argv[1:]):
        figures = json.loads((folder / "result.json").read_text())["figures"]
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
        before, after = figures["eval_before"], figures["eval_after"]
        rows.append({"run": folder.name,
                     "reward before": before.get("mean_reward", math.nan), "reward after": after.get("mean_reward", math.nan),
                     "exact before": 100 * before["accuracy"], "exact after": 100 * after["accuracy"],
                     "KL (last)": metrics[-1].get("kl", math.nan)})
    columns = [c for c in ("reward before", "reward after", "exact before", "exact after", "KL (last)")
               if not all(math.isnan(r[c]) for r in rows)]
    width = max(len(r["run"]) for r in rows) + 2
    print(f"{'run':<{width}}" + "".join(f"{c:>15}" for c in columns))
    mean = {c: sum(r[c] for r in rows) / len(rows) for c in columns}
    for r in rows + [dict(mean, run="mean")]:
        print(f"{r['run']:<{width}}" + "".join(f"{r[c]:>14.2f}%" if c.startswith("exact") else f"{r[c]:>15.4f}" for c in columns))
    exact_gain = mean["exact after"] - mean["exact before"]
    reward_gain = mean["reward after"] - mean["reward before"] if "reward before" in columns else None
    print(f"held-out exact match: {mean['exact before']:.2f}% -> {mean['exact after']:.2f}% "
          f"({exact_gain:+.2f} points, mean of {len(rows)} runs)"
          + (f"; mean reward {reward_gain:+.4f}" if reward_gain is not None else ""))
    helped = exact_gain > 0 and (reward_gain is None or reward_gain > 0)
    print("training raised " + ("mean reward and " if reward_gain is not None else "") + "exact match over the SFT model"
          if helped else "training did NOT raise " + ("both mean reward and " if reward_gain is not None else "") +
          "exact match over the SFT model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
