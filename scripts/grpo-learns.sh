#!/usr/bin/env bash
# Does GRPO with a verifiable reward improve the demo model? Runs configs/demo-grpo.yaml from the demo
# SFT model with 3 seeds (train.seed 1, 2, 3), once with the built-in verifier reward and once with the
# same judgement made by the example reward command (scripts/reward-exact-match.py, fed JSON lines),
# and prints per seed and as the mean the held-out exact match (data/prompts_eval.jsonl, greedy)
# before GRPO (the SFT model) and after.
#
#   scripts/grpo-learns.sh [BUILD_DIR] [-- extra --set arguments for every run]
#   FERRY_GRPO_REWARDS="verifier" scripts/grpo-learns.sh   # one reward kind only
#
# Needs build/ferry and runs/demo/sft/final (scripts/demo.sh makes it; or `ferry train-sft --config
# configs/demo-sft.yaml`). Runs go to runs/grpo-learns/<reward>-seed-N. CPU, 2 threads: about
# a minute per run.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
[ -d runs/demo/sft/final ] || { echo "missing runs/demo/sft/final: run scripts/demo.sh (or configs/demo-sft.yaml) first" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
for reward in ${FERRY_GRPO_REWARDS:-verifier command}; do
  case $reward in
    verifier) rewards='[{kind: verifier, match: exact}]' ;;
    command) rewards='[{kind: command, command: "python3 scripts/reward-exact-match.py"}]' ;;
    *) echo "unknown reward kind '$reward' in FERRY_GRPO_REWARDS (verifier, command)" >&2; exit 2 ;;
  esac
  runs=()
  for seed in 1 2 3; do
    out=runs/grpo-learns/$reward-seed-$seed
    runs+=("$out")
    echo "== $reward reward, seed $seed -> $out"
    "$ferry" train-grpo --config configs/demo-grpo.yaml --set train.seed=$seed --set output.dir=$out \
      --set "rewards=$rewards" --set train.device=cpu --set logging.progress=never "$@" \
      | grep -E "train-grpo: (before|after)|engine peak"
  done
  echo "== GRPO with the $reward reward"
  "$root/scripts/rl_learns_summary.py" "${runs[@]}"
done
