#!/usr/bin/env bash
# Does an offline preference stage improve the demo model? Runs one stage config (default
# configs/demo-kto.yaml with train-kto; FERRY_PREFERENCE_CONFIG / FERRY_PREFERENCE_STAGE pick another,
# e.g. configs/demo-dpo.yaml and dpo) from the demo SFT model with 3 seeds (train.seed 1, 2, 3) and
# prints the held-out exact match (data/prompts_eval.jsonl, greedy, `ferry eval`) of the starting
# model and of each seed's final model, with the per-kind figures of each.
#
#   scripts/preference-learns.sh [BUILD_DIR] [-- extra --set arguments for every run]
#
# Needs build/ferry and runs/demo/sft/final (scripts/demo.sh makes it; or `ferry train-sft --config
# configs/demo-sft.yaml`). Runs go to runs/preference-learns/<config name>-seed-N. CPU, 2 threads:
# about a minute per run. Online DPO (the run judges its own held-out answers too):
#   FERRY_PREFERENCE_CONFIG=configs/demo-online-dpo.yaml FERRY_PREFERENCE_STAGE=dpo scripts/preference-learns.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
[ -d runs/demo/sft/final ] || { echo "missing runs/demo/sft/final: run scripts/demo.sh (or configs/demo-sft.yaml) first" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
config=${FERRY_PREFERENCE_CONFIG:-configs/demo-kto.yaml}
stage=${FERRY_PREFERENCE_STAGE:-kto}
echo "== the starting model, runs/demo/sft/final"
"$ferry" eval --model runs/demo/sft/final | sed 's/^/   /'
for seed in 1 2 3; do
  out=runs/preference-learns/$(basename "$config" .yaml)-seed-$seed
  echo "== train-$stage, $config, seed $seed -> $out"
  "$ferry" "train-$stage" --config "$config" --set train.seed=$seed --set output.dir=$out \
    --set train.device=cpu --set logging.progress=never "$@" | grep -E "^train-$stage: ([0-9]+ steps|after training)"
  "$ferry" eval --model "$out/final" | sed 's/^/   /'
done
