#!/usr/bin/env bash
# The Gemma 3 real-model demo (issue 53), shaped as scripts/demo-real.sh: the base (pretrained)
# Gemma 3 270M, read straight from its Q4_K_M GGUF file (scripts/fetch-gemma3.sh), learns two-digit
# addition with LoRA SFT (configs/gemma3-sft-lora.yaml; the additions of
# scripts/make_real_demo_data.py --no-system: "What is 47 + 38?" -> "85", no system prompt and no
# rehearsal), and `ferry eval` prints held-out exact match
# (200 additions never seen in training, in either order) before and after. The file carries no
# chat template: Gemma's own turn format renders the questions (configs/templates/gemma3.yaml), for
# training and for both evals (the tuned model's folder does not carry a YAML template, so eval is
# told it).
# Arguments: the training seeds (default: 1). Each seed trains into runs/gemma3/sft-seed<N>.
# Environment: FERRY_GEMMA3_STEPS (default 100) overrides train.max_steps; FERRY_BIN (default
# build/ferry, built by scripts/build.sh) names the ferry executable to run instead.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ -n "${FERRY_BIN:-}" ]; then
  ferry=$FERRY_BIN
else
  "$root/scripts/build.sh" ferry
  ferry=build/ferry
fi
python=${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python
gguf=$("$root/scripts/fetch-gemma3.sh")
template=configs/templates/gemma3.yaml
data=runs/gemma3/data
start=$(date +%s)
"$python" scripts/make_real_demo_data.py --no-system $data
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1)
steps=${FERRY_GEMMA3_STEPS:-100}

exact_match() {  # MODEL OUTPUT_JSONL: greedy answers to the 200 held-out additions
  "$ferry" eval --model "$1" --chat-template $template --prompts $data/prompts_eval.jsonl \
    --max-new-tokens 6 --batch-size 16 --output "$2"
}
accuracy() { grep -o 'exact match: [0-9]*/[0-9]* = [0-9.]*%' "$1" | tail -1; }
percent() { accuracy "$1" | sed 's/.*= \([0-9.]*\)%/\1/'; }

echo "== before: the base Gemma 3 270M ($gguf)"
exact_match "$gguf" runs/gemma3/before.jsonl | tee runs/gemma3/before.log
for seed in "${seeds[@]}"; do
  out=runs/gemma3/sft-seed$seed
  echo "== LoRA SFT, seed $seed ($steps steps) -> $out"
  "$ferry" train-sft --config configs/gemma3-sft-lora.yaml --set model.path="$gguf" --set train.seed="$seed" \
    --set train.max_steps="$steps" --set train.eval_every="$steps" --set train.save_every="$steps" \
    --set output.dir="$out"
  echo "== after, seed $seed"
  exact_match "$out/final" "$out/eval.jsonl" | tee "$out/eval.log"
done
echo
elapsed=$(( $(date +%s) - start ))
echo "== held-out exact match (200 two-digit additions), $elapsed s in all (${#seeds[@]} seed(s), $steps steps each)"
echo "before:          $(accuracy runs/gemma3/before.log)"
after=()
for seed in "${seeds[@]}"; do
  echo "after seed $seed:    $(accuracy runs/gemma3/sft-seed$seed/eval.log)"
  after+=("$(percent runs/gemma3/sft-seed$seed/eval.log)")
done
"$python" -c '
import statistics, sys
values = [float(v) for v in sys.argv[1:]]
spread = statistics.stdev(values) if len(values) > 1 else 0.0
mean, low, high = statistics.mean(values), min(values), max(values)
print(f"after, mean over {len(values)} seed(s): {mean:.1f}% +- {spread:.1f} (sample sd; min {low:.1f}%, max {high:.1f}%)")
' "${after[@]}"
echo "a few additions before and after (seed ${seeds[0]}):"
"$python" -c '
import json, sys
before = [json.loads(line) for line in open(sys.argv[1])]
after = [json.loads(line) for line in open(sys.argv[2])]
for b, a in list(zip(before, after))[:5]:
    question, truth, was, now = b["messages"][-1]["content"], a["gt_answer"], b["answer"], a["answer"]
    print(f"  {question} ({truth}): before {was!r}, after {now!r}")
' runs/gemma3/before.jsonl "runs/gemma3/sft-seed${seeds[0]}/eval.jsonl"
