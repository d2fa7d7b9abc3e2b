#!/usr/bin/env bash
# Fingerprints of what the demo trains: runs the demo's SFT, RM and PPO stages and a GRPO run from
# the SFT model (configs/demo-*.yaml, CPU, 2 threads, seed 1) into one folder and prints the sha256
# of each final model.safetensors. A refactor that claims "no behaviour change" shows the same four
# lines before and after (on one machine: the figures depend on its SIMD level and thread count).
#
#   scripts/weights-sha.sh [BUILD_DIR] [-- extra --set arguments for every run]
#   FERRY_SHA_DIR=runs/weights-sha (default)
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
out=${FERRY_SHA_DIR:-runs/weights-sha}
rm -rf "$out"
common=(--set train.device=cpu --set logging.progress=never)
run() {  # run STAGE CONFIG DIR [--set ...]
  local stage=$1 config=$2 dir=$3; shift 3
  local start=$SECONDS
  "$ferry" "$stage" --config "$config" --set output.dir="$dir" "${common[@]}" "$@" > "$dir.log" 2>&1 \
    || { echo "$stage failed; its output: $dir.log" >&2; tail -n 20 "$dir.log" >&2; exit 1; }
  echo "$stage: $(sha256sum "$dir/final/model.safetensors" | cut -c1-64)  ($((SECONDS - start)) s)"
}
mkdir -p "$out"
run train-sft configs/demo-sft.yaml "$out/sft" "$@"
run train-rm configs/demo-rm.yaml "$out/rm" --set model.path="$out/sft/final" "$@"
run train-ppo configs/demo-ppo.yaml "$out/ppo" --set model.path="$out/sft/final" \
  --set ppo.reward_model="$out/rm/final" "$@"
run train-grpo configs/demo-grpo.yaml "$out/grpo" --set model.path="$out/sft/final" --set train.seed=1 "$@"
