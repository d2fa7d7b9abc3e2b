#!/usr/bin/env bash
# Does multi-turn RL teach the demo model to use a tool? The calculator demo (docs/environments.md):
# configs/demo-calc-sft.yaml teaches the demo SFT model the calculator's call format on
# data/calc_sft.jsonl (made by scripts/make_calc_demo_data.py; a quarter of its answers call the
# tool), then configs/demo-calc-grpo.yaml runs GRPO in episodes against scripts/envs/calculator.py
# with 3 seeds (train.seed 1, 2, 3). Prints per seed and as the mean the held-out exact match
# (data/calc_prompts_eval.jsonl, greedy episodes: the final answer against gt_answer) before GRPO
# (the calculator-SFT model) and after, and the tool calls per episode in the first and last rollouts.
#
#   scripts/agent-learns.sh [BUILD_DIR] [-- extra --set arguments for every GRPO run]
#
# Needs build/ferry and runs/demo/sft/final (scripts/demo.sh makes it). Makes runs/demo/calc-sft
# (about 3 minutes on 2 CPU cores) when it is missing; each GRPO run takes about a minute. Runs go
# to runs/agent-learns/seed-N.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
[ -d runs/demo/sft/final ] || { echo "missing runs/demo/sft/final: run scripts/demo.sh (or configs/demo-sft.yaml) first" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if [ ! -f runs/demo/calc-sft/final/config.json ]; then
  echo "== calculator SFT -> runs/demo/calc-sft"
  "$ferry" train-sft --config configs/demo-calc-sft.yaml --set train.device=cpu --set logging.progress=never \
    | grep -E "train-sft: [0-9]+ steps"
fi
runs=()
for seed in 1 2 3; do
  out=runs/agent-learns/seed-$seed
  runs+=("$out")
  echo "== GRPO against the calculator, seed $seed -> $out"
  "$ferry" train-grpo --config configs/demo-calc-grpo.yaml --set train.seed=$seed --set output.dir=$out \
    --set train.device=cpu --set logging.progress=never "$@" | grep -E "train-grpo: (before|after)"
done
echo "== GRPO in episodes against the calculator"
"$root/scripts/rl_learns_summary.py" "${runs[@]}"
python3 - "${runs[@]}" <<'PY'
import json, sys
for run in sys.argv[1:]:
    rows = [json.loads(line) for line in open(f"{run}/metrics.jsonl") if '"episode/tool_calls"' in line]
    print(f"{run}: tool calls per episode {rows[0]['episode/tool_calls']:.2f} (rollout 1) -> "
          f"{rows[-1]['episode/tool_calls']:.2f} (rollout {len(rows)}); reward {rows[0]['reward/mean']:.3f} -> "
          f"{rows[-1]['reward/mean']:.3f}")
PY
