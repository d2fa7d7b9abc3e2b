#!/usr/bin/env bash
# DiLoCo (distributed.mode diloco) against plain data parallelism at the same number of samples:
# the demo SFT (configs/demo-sft.yaml: the tiny Llama from scratch, fp32 on the CPU) for STEPS steps
# of a global batch of 32 sequences, on NPROC processes (c10d Gloo, `ferry launch`):
#   sync                gradients all-reduced every step (distributed.mode sync)
#   int8/15 nesterov    15 local AdamW steps per process, int8 pseudo-gradients, the DiLoCo paper's
#                       outer Nesterov step (outer_lr 0.7, outer_momentum 0.9)
#   int8/15 average     the same with outer_lr 1, outer_momentum 0 (the defaults): the processes'
#                       weights averaged
#   fp32/50 average     50 local steps, fp32 pseudo-gradients, averaged
# Prints each run's held-out eval loss at the end, the bytes each process handed to collectives
# (the sum of metrics.jsonl's comm_bytes, rank 0) in total and per optimizer step, and the ratios
# against sync. DiLoCo's processes each step on their own 32/NPROC sequences.
#
#   scripts/bench-diloco.sh [BUILD_DIR] [STEPS] [NPROC]     (default: build, 1500 (the demo), 2)
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
steps="${2:-1500}"
nproc_run="${3:-2}"
ferry="$build/ferry"
[[ -x "$ferry" ]] || { echo "error: $ferry not found; build it: cmake --build $build --target ferry" >&2; exit 2; }
(( steps % 150 == 0 )) || { echo "error: STEPS ($steps) must be a multiple of 150 (15 and 50 inner steps)" >&2; exit 2; }
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
cores=$(nproc)
share=$(( cores / nproc_run > 0 ? cores / nproc_run : 1 ))
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$here"
micro=$(( 32 / nproc_run ))
common=(--config configs/demo-sft.yaml --set train.max_steps="$steps" --set train.eval_every="$steps"
        --set train.save_every=0 --set logging.progress=never --set logging.tensorboard=false
        --set train.device=cpu --set train.grad_accumulation=1 --set train.micro_batch_size="$micro")
run() {  # name, extra --set arguments...
  local name=$1; shift
  local start=$SECONDS
  OMP_NUM_THREADS=$share "$ferry" launch --nproc "$nproc_run" -- train-sft "${common[@]}" \
    --set output.dir="$work/$name" "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
  echo $(( SECONDS - start )) > "$work/$name.seconds"
}
diloco=(--set distributed.mode=diloco)
average=(--set distributed.outer_lr=1.0 --set distributed.outer_momentum=0)
nesterov=(--set distributed.outer_lr=0.7 --set distributed.outer_momentum=0.9)
run sync
run int8_15_nesterov "${diloco[@]}" --set distributed.inner_steps=15 --set distributed.pseudo_gradient=int8 "${nesterov[@]}"
run int8_15_average "${diloco[@]}" --set distributed.inner_steps=15 --set distributed.pseudo_gradient=int8 "${average[@]}"
run fp32_50_average "${diloco[@]}" --set distributed.inner_steps=50 --set distributed.pseudo_gradient=fp32 "${average[@]}"
"$python" - "$work" "$cores" "$nproc_run" "$steps" <<'PY'
import json, sys
work, cores, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def summary(run):
    rows = [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]
    sent = sum(r.get("comm_bytes", 0) for r in rows if "grad_norm" in r)
    evals = [r["eval_loss"] for r in rows if "eval_loss" in r]
    seconds = int(open(f"{work}/{run}.seconds").read())
    return evals[-1], sent, seconds
print(f"demo SFT, {steps} steps x 32 sequences on {n} processes (Gloo), {cores} cores")
base = summary("sync")
for name in ("sync", "int8_15_nesterov", "int8_15_average", "fp32_50_average"):
    loss, sent, seconds = summary(name)
    line = (f"{name:17s} eval loss {loss:.4f}  sent {sent / 2**20:9.2f} MiB ({sent / steps / 1024:8.1f} KiB/step)"
            f"  {seconds:4d} s")
    if name != "sync":
        line += f"  | eval {loss - base[0]:+.4f} ({(loss / base[0] - 1) * 100:+.1f}%), {base[1] / max(sent, 1):.0f}x fewer bytes"
    print(line)
PY
