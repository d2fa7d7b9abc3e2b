#!/usr/bin/env bash
# Does PPO improve the demo model? Runs configs/demo-ppo.yaml from the demo SFT model against the
# demo reward model with 3 seeds (train.seed 1, 2, 3) and prints, per seed and as the mean, the
# held-out prompts' (data/prompts_eval.jsonl) mean reward and exact match before PPO (the SFT
# model, greedy) and after, and the final KL to the reference (mean per response, last rollout).
#
#   scripts/ppo-learns.sh [BUILD_DIR] [-- extra --set arguments for every run]
#
# Needs build/ferry and the demo's runs/demo/sft/final and runs/demo/rm/final (scripts/demo.sh
# makes them; or `ferry train-sft --config configs/demo-sft.yaml` and `ferry train-rm --config
# configs/demo-rm.yaml`). Runs go to runs/ppo-learns/seed-N. CPU, 2 threads: about 1.5 minutes per seed.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
for folder in runs/demo/sft/final runs/demo/rm/final; do
  [ -d "$folder" ] || { echo "missing $folder: run scripts/demo.sh (or the demo-sft / demo-rm configs) first" >&2; exit 2; }
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
for seed in 1 2 3; do
  out=runs/ppo-learns/seed-$seed
  echo "== seed $seed -> $out"
  "$ferry" train-ppo --config configs/demo-ppo.yaml --set train.seed=$seed --set output.dir=$out \
    --set train.device=cpu --set logging.progress=never "$@" | grep -E "train-ppo: (before|after)|engine peak"
done
"$root/scripts/rl_learns_summary.py" runs/ppo-learns/seed-1 runs/ppo-learns/seed-2 runs/ppo-learns/seed-3
