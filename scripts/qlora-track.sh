#!/usr/bin/env bash
# Does QLoRA (a 4-bit NF4 base) train like LoRA on the full-precision base? Trains the demo SFT
# model from scratch for 300 steps (configs/demo-sft.yaml, the base), then runs 20 LoRA steps of
# configs/demo-sft-lora.yaml on it twice, lora.quantize_base none and nf4 (double quantisation), in
# fp32 and in bf16, and prints both loss curves, the largest per-step difference (absolute and
# relative) and each run's time and NF4 bytes per weight.
#
#   scripts/qlora-track.sh [BUILD_DIR] [-- extra --set arguments for every LoRA run]
#
# Runs go to runs/qlora-track/. CPU, 2 threads: about two minutes in all.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
out=runs/qlora-track
if [ ! -f "$out/base/final/config.json" ]; then
  rm -rf "$out/base"
  "$ferry" train-sft --config configs/demo-sft.yaml --set train.max_steps=300 --set train.eval_every=0 \
    --set train.save_every=0 --set train.device=cpu --set logging.progress=never --set output.dir="$out/base" \
    | grep -E "steps, last loss" || true
fi
for precision in fp32 bf16; do
  for base in none nf4; do
    run="$out/$precision-$base"
    rm -rf "$run"
    start=$(date +%s.%N)
    "$ferry" train-sft --config configs/demo-sft-lora.yaml --set model.path="$out/base/final" \
      --set train.max_steps=20 --set train.eval_every=0 --set train.save_every=0 --set train.warmup_steps=2 \
      --set train.precision="$precision" --set lora.quantize_base="$base" --set train.device=cpu \
      --set logging.progress=never --set output.dir="$run" "$@" | grep -E "QLoRA base" || true
    echo "$precision $base: $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
  done
done
python3 - <<'PY'
import json
out = "runs/qlora-track"
def losses(run):
    rows = [json.loads(l) for l in open(f"{out}/{run}/metrics.jsonl")]
    return [r["loss"] for r in rows if "grad_norm" in r]
for precision in ("fp32", "bf16"):
    a, b = losses(f"{precision}-none"), losses(f"{precision}-nf4")
    assert len(a) == len(b) == 20, (len(a), len(b))
    diff = [abs(x - y) for x, y in zip(a, b)]
    rel = [d / x for d, x in zip(diff, a)]
    print(f"{precision}: LoRA   " + " ".join(f"{x:.3f}" for x in a))
    print(f"{precision}: QLoRA  " + " ".join(f"{x:.3f}" for x in b))
    print(f"{precision}: largest step difference {max(diff):.4f} ({100 * max(rel):.2f}%), mean {sum(diff) / 20:.4f}; "
          f"mean of the last 5 steps LoRA {sum(a[-5:]) / 5:.4f}, QLoRA {sum(b[-5:]) / 5:.4f}")
PY
