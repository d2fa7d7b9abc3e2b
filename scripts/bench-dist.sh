#!/usr/bin/env bash
# Data-parallel SFT throughput (c10d Gloo, `ferry launch`) against one process with the same global
# batch, on the demo model from scratch (configs/demo-sft.yaml's data and shape), fp32 on the CPU:
# 1 process with train.grad_accumulation NPROC and OMP threads = all cores, then NPROC processes
# with accumulation 1 sharing the cores. Prints tokens/s of each (the mean of steps 6..STEPS from
# metrics.jsonl, past warm-up), the ratio, the core count, and the largest relative difference of
# the two runs' losses (summation order aside, the same steps).
# On a machine with as many cores as the processes need this shows the split's overhead, not a
# speed-up over one process using all of them.
#
#   scripts/bench-dist.sh [BUILD_DIR] [STEPS] [NPROC] [SETTINGS]     (default: build, 40, 2, "")
#
# SETTINGS are extra `--set` arguments for the NPROC-process run, e.g. ZeRO stage 3 with paged weights:
#   scripts/bench-dist.sh build 40 4 "--set distributed.zero_stage=3 --set offload.policy=params"
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
steps="${2:-40}"
nproc_run="${3:-2}"
settings="${4:-}"
ferry="$build/ferry"
[[ -x "$ferry" ]] || { echo "error: $ferry not found; build it: cmake --build $build --target ferry" >&2; exit 2; }
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
cores=$(nproc)
share=$(( cores / nproc_run > 0 ? cores / nproc_run : 1 ))
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$here"
common=(--config configs/demo-sft.yaml --set train.max_steps="$steps" --set train.eval_every=0 --set train.save_every=0
        --set logging.progress=never --set logging.tensorboard=false --set train.device=cpu
        --set data.eval_file="")
OMP_NUM_THREADS=$cores "$ferry" train-sft "${common[@]}" --set output.dir="$work/one" \
  --set train.grad_accumulation="$nproc_run" --set train.micro_batch_size=16 > "$work/one.log" 2>&1
OMP_NUM_THREADS=$share "$ferry" launch --nproc "$nproc_run" -- train-sft "${common[@]}" --set output.dir="$work/two" \
  --set train.grad_accumulation=1 --set train.micro_batch_size=16 $settings > "$work/two.log" 2>&1 \
  || { cat "$work/two.log" >&2; exit 1; }
"$python" - "$work" "$cores" "$nproc_run" "$settings" <<'PY'
import json, sys
work, cores, n, settings = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def rows(run):
    return [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl") if '"grad_norm"' in l]
one, two = rows("one"), rows("two")
def rate(r):
    tail = [x["tokens_per_s"] for x in r[5:]]
    return sum(tail) / len(tail)
worst = max(abs(a["loss"] - b["loss"]) / a["loss"] for a, b in zip(one, two))
print(f"cores: {cores}; global batch {16 * n} sequences (16 x {n}), {len(one)} steps")
print(f"1 process, accumulation {n}, {cores} threads: {rate(one):9.0f} tokens/s")
print(f"{n} processes (Gloo), accumulation 1, {max(cores // n, 1)} thread(s) each{(' ' + settings) if settings else ''}: "
      f"{rate(two):9.0f} tokens/s")
print(f"ratio {n} processes / 1 process: {rate(two) / rate(one):.2f}x")
print(f"largest relative loss difference over {len(one)} steps: {worst:.2e}")
PY
