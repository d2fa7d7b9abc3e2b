#!/usr/bin/env bash
# Data-parallel SFT throughput (c10d Gloo, `ferry launch`) against one process with the same global
# batch, on the demo model from scratch (configs/demo-sft.yaml's data and shape), fp32 on the CPU:
# 1 process with train.grad_accumulation 2 and OMP threads = all cores, then 2 processes with
# accumulation 1 and half the cores each. Prints tokens/s of each (the mean of steps 6..STEPS from
# metrics.jsonl, past warm-up), the ratio, the core count, and whether the two runs' losses agree.
# On a machine with as many cores as the processes need this shows the split's overhead, not a
# speed-up over one process using all of them.
#
#   scripts/bench-dist.sh [BUILD_DIR] [STEPS]     (default: build, 40)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
steps="${2:-40}"
ferry="$build/ferry"
[[ -x "$ferry" ]] || { echo "error: $ferry not found; build it: cmake --build $build --target ferry" >&2; exit 2; }
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
cores=$(nproc)
half=$(( cores / 2 > 0 ? cores / 2 : 1 ))
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$here"
common=(--config configs/demo-sft.yaml --set train.max_steps="$steps" --set train.eval_every=0 --set train.save_every=0
        --set logging.progress=never --set logging.tensorboard=false --set train.device=cpu
        --set data.eval_file="")
OMP_NUM_THREADS=$cores "$ferry" train-sft "${common[@]}" --set output.dir="$work/one" \
  --set train.grad_accumulation=2 --set train.micro_batch_size=16 > "$work/one.log" 2>&1
OMP_NUM_THREADS=$half "$ferry" launch --nproc 2 -- train-sft "${common[@]}" --set output.dir="$work/two" \
  --set train.grad_accumulation=1 --set train.micro_batch_size=16 > "$work/two.log" 2>&1
"$python" - "$work" "$cores" <<'PY'
import json, sys
work, cores = sys.argv[1], int(sys.argv[2])
def rows(run):
    return [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl") if '"grad_norm"' in l]
one, two = rows("one"), rows("two")
def rate(r):
    tail = [x["tokens_per_s"] for x in r[5:]]
    return sum(tail) / len(tail)
worst = max(abs(a["loss"] - b["loss"]) / a["loss"] for a, b in zip(one, two))
print(f"cores: {cores}; global batch 32 sequences (16 x 2), {len(one)} steps")
print(f"1 process, accumulation 2, {cores} threads:      {rate(one):9.0f} tokens/s")
print(f"2 processes (Gloo), accumulation 1, {max(cores // 2, 1)} threads each: {rate(two):9.0f} tokens/s")
print(f"ratio 2 processes / 1 process: {rate(two) / rate(one):.2f}x")
print(f"largest relative loss difference over {len(one)} steps: {worst:.2e}")
PY
