#!/usr/bin/env bash
# PPO episode time, Ferry vs TRL's PPOTrainer, with the demo models, prompts and settings, on the CPU,
# fp32, same thread count. One episode (Ferry: one rollout / train step) = generate up to 16 new
# tokens for 32 prompts (sampling, temperature 1, stop at <|end|> or EOS), score them (policy,
# reference, value and reward forward passes, KL-penalised rewards, GAE), then one PPO epoch of
# minibatch updates (minibatch 16 = micro batch 16, so two AdamW steps). Policy and reference:
# runs/demo/sft/final; reward and value model: runs/demo/rm/final.
#
#   scripts/bench-ppo.sh [BUILD_DIR] [THREADS]
# BUILD_DIR (default build) must contain ferry; THREADS (default 2) goes to both sides
# (OMP_NUM_THREADS, torch.set_num_threads). Each side runs 4 episodes; the first (warm-up: first
# allocations, lazy initialisation) is dropped and the other three are averaged. The last line,
#   ferry speed-up: TRL seconds / Ferry seconds = R x
# is the figure to read (above 1: Ferry is faster; the target is >= 2). The per-episode lines
# split each side's time into generate / score / learn. TRL is 0.24.0, the last release with
# PPOTrainer, which scripts/bench_ppo_trl.py installs on first use into $FERRY_DEPS/trl-0.24 (see
# its docstring for how TRL's batch settings are mapped onto Ferry's). Keep THREADS at or below the
# number of idle cores, or both figures are mostly waiting.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
build="${1:-$here/build}"
threads="${2:-2}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
ferry="$build/ferry"
episodes=4
[[ -x "$ferry" ]] || { echo "error: $ferry not found; build it: scripts/build.sh" >&2; exit 2; }
for model in runs/demo/sft/final runs/demo/rm/final; do
  if [[ ! -f "$model/config.json" ]]; then
    echo "error: $model not found; make the demo models first:" >&2
    echo "  $ferry train-sft --config configs/demo-sft.yaml" >&2
    echo "  $ferry train-rm --config configs/demo-rm.yaml" >&2
    exit 2
  fi
done
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "== ferry train-ppo: $episodes rollouts, threads $threads"
"$ferry" train-ppo --config configs/demo-ppo.yaml --set output.dir="$tmp/ppo" \
  --set train.max_steps=$episodes --set train.device=cpu --set ppo.rollout_batch_size=32 \
  --set train.micro_batch_size=16 --set generation.max_new_tokens=16 --set ppo.ppo_epochs=1 \
  --set train.save_every=0 > "$tmp/ferry.log" 2>&1 || { cat "$tmp/ferry.log" >&2; exit 1; }
"$python" - "$tmp/ppo/metrics.jsonl" <<'PY' | tee "$tmp/ferry.txt"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
rows = [r for r in rows if "time/rollout" in r]
if not rows:
    sys.exit(f"no rows with time/rollout in {sys.argv[1]}")
for r in rows:
    print(f"ferry episode {int(r['step'])}: generate {r['time/generate']:.3f} s, score {r['time/score']:.3f} s, "
          f"learn {r['time/learn']:.3f} s, total {r['time/rollout']:.3f} s")
rest = rows[1:] or rows
print(f"ferry mean episode seconds (excluding the first): {sum(r['time/rollout'] for r in rest) / len(rest):.4f}")
PY

echo "== TRL PPOTrainer: $episodes episodes, threads $threads"
"$python" "$here/scripts/bench_ppo_trl.py" --policy runs/demo/sft/final --reward runs/demo/rm/final \
  --prompts data/prompts_train.jsonl --rollout-batch-size 32 --micro-batch-size 16 --mini-batch-size 16 \
  --response-length 16 --ppo-epochs 1 --episodes $episodes --temperature 1.0 --kl-coef 0.05 \
  --threads "$threads" --seed 1 2> "$tmp/trl.err" | tee "$tmp/trl.txt" || { cat "$tmp/trl.err" >&2; exit 1; }

"$python" - "$tmp/ferry.txt" "$tmp/trl.txt" <<'PY'
import sys
def mean(file, prefix):
    for line in open(file):
        if line.startswith(prefix):
            return float(line.rsplit(":", 1)[1])
    sys.exit(f"no '{prefix}' line in {file}")
ferry = mean(sys.argv[1], "ferry mean episode seconds")
trl = mean(sys.argv[2], "trl mean episode seconds")
print(f"PPO mean episode seconds (excluding the first): ferry {ferry:.4f}, TRL {trl:.4f}")
print(f"ferry speed-up: TRL seconds / Ferry seconds = {trl / ferry:.2f} x")
PY
