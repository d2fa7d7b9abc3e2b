#!/usr/bin/env bash
# Do bf16 weights without an fp32 master copy train as well as with one? Fine-tunes the demo SFT
# model (runs/demo/sft/final, trained first with configs/demo-sft.yaml when missing) for 300 more
# steps at learning rate 2e-4 in train.precision bf16 under offload.policy optimizer with
# offload.master_weights fp32 (6 bytes per parameter: bf16 weights + fp32 master), bf16_kahan (4)
# and bf16_stochastic (2), for train.seed 1, 2 and 3, and prints each run's final eval loss and
# its ratio to the fp32 master's per seed and on average. A control run per seed (fp32 master
# with train.adam_eps 1.0001e-8 instead of 1e-8) shows how far the eval loss moves when the fp32
# master run alone is perturbed: the noise floor (as scripts/int8-moments.sh).
#
#   scripts/master-weights.sh [BUILD_DIR] [-- extra --set arguments for every run]
#
# Runs go to runs/master-weights/<master>-seed-N. CPU, 2 threads: about a minute per run.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
base=runs/demo/sft/final
ensure_demo_sft_model master-weights
for seed in 1 2 3; do
  for run in fp32 bf16_kahan bf16_stochastic control; do
    master=$run eps=1e-8
    [[ $run == control ]] && master=fp32 eps=1.0001e-8
    out="runs/master-weights/$run-seed-$seed"
    rm -rf "$out"
    "$ferry" train-sft --config configs/demo-sft.yaml --set model.config= --set model.path="$base" \
      --set train.learning_rate=2e-4 --set train.warmup_steps=10 --set train.max_steps=300 --set train.eval_every=300 \
      --set train.save_every=0 --set train.seed="$seed" --set train.precision=bf16 --set offload.policy=optimizer \
      --set train.adam_eps="$eps" --set offload.master_weights="$master" --set train.device=cpu \
      --set logging.progress=never --set output.dir="$out" "$@" | grep -E "eval loss|host" || true
  done
done
python3 - <<'PY'
import json
runs = ("fp32", "bf16_kahan", "bf16_stochastic", "control")
ratios = {r: [] for r in runs[1:]}
for seed in (1, 2, 3):
    loss = {r: json.load(open(f"runs/master-weights/{r}-seed-{seed}/result.json"))["figures"]["eval_loss"] for r in runs}
    for r in runs[1:]:
        ratios[r].append(loss[r] / loss["fp32"])
    print(f"seed {seed}: final eval loss fp32 master {loss['fp32']:.4f}, bf16_kahan {loss['bf16_kahan']:.4f}, "
          f"bf16_stochastic {loss['bf16_stochastic']:.4f}, control (fp32, eps nudged) {loss['control']:.4f}")
worst = lambda r: max(r, key=lambda x: abs(x - 1))
for r in runs[1:]:
    print(f"{r} / fp32 master final eval loss: mean {sum(ratios[r]) / 3:.4f} (worst {worst(ratios[r]):.4f})")
PY
