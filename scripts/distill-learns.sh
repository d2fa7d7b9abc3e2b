#!/usr/bin/env bash
# Does on-policy distillation teach a small student more than SFT does? For seeds 1, 2, 3: the
# student of configs/demo-distill.yaml (configs/demo-student-model.json, a quarter of the demo
# model, from scratch) trained (a) by SFT on data/sft_train.jsonl with configs/demo-sft.yaml's
# schedule and (b) by `train-distill` from the demo SFT model as teacher on the same data and
# schedule; prints the held-out exact match (data/prompts_eval.jsonl, greedy, `ferry eval`) of the
# teacher and of each student, with the per-kind figures.
#
#   scripts/distill-learns.sh [BUILD_DIR] [-- extra --set arguments for the distillation runs]
#
# Needs build/ferry and runs/demo/sft/final (scripts/demo.sh makes it). Runs go to
# runs/distill-learns/{sft,distill}-seed-N. CPU, 2 threads: about 2.5 min per run.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
[ -d runs/demo/sft/final ] || { echo "missing runs/demo/sft/final: run scripts/demo.sh (or configs/demo-sft.yaml) first" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
common=(--set train.device=cpu --set logging.progress=never)
echo "== the teacher, runs/demo/sft/final"
"$ferry" eval --model runs/demo/sft/final | sed 's/^/   /'
for seed in 1 2 3; do
  sft=runs/distill-learns/sft-seed-$seed
  echo "== SFT of the student, seed $seed -> $sft"
  "$ferry" train-sft --config configs/demo-sft.yaml --set model.config=configs/demo-student-model.json \
    --set train.seed=$seed --set output.dir=$sft "${common[@]}" | grep -E "^train-sft: [0-9]+ steps"
  "$ferry" eval --model "$sft/final" | sed 's/^/   /'
  out=runs/distill-learns/distill-seed-$seed
  echo "== train-distill of the student, seed $seed -> $out"
  "$ferry" train-distill --config configs/demo-distill.yaml --set train.seed=$seed --set output.dir=$out \
    "${common[@]}" "$@" | grep -E "^train-distill: [0-9]+ steps"
  "$ferry" eval --model "$out/final" | sed 's/^/   /'
done
