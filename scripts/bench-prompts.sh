#!/usr/bin/env bash
# An RL prompt file of many lines (default 10 million, ~0.7 GB, demo-style arithmetic questions
# with gt_answer): the time to open it (every line checked and rendered with the demo tokenizer and
# template) and the memory it costs (a PromptFile keeps where each prompt starts), against holding
# every rendered prompt (measured on the first million, scaled), in one run; then the peak resident
# memory of a whole `ferry train-grpo` run (one rollout) on the file, against the same run on the
# 8-line sample of it.
#
#   scripts/bench-prompts.sh [LINES] [BUILD_DIR]
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
lines="${1:-10000000}"
build="${2:-$here/build}"
cmake --build "$build" --target prompt_file_bench ferry -j "${FERRY_JOBS:-2}" > /dev/null
cd "$here"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$work/prompts.jsonl" "$lines" <<'PY'
import json, random, sys
path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
with open(path, "w") as f:
    for i in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        f.write(json.dumps({"messages": [{"role": "user", "content": f"What is {a} plus {b}?"}],
                            "gt_answer": str(a + b), "kind": "add"}) + "\n")
PY
head -n 8 "$work/prompts.jsonl" > "$work/small.jsonl"
echo "== $(wc -l < "$work/prompts.jsonl") lines, $(du -h "$work/prompts.jsonl" | cut -f1)"
"$build/tests/bench/prompt_file_bench" --prompts "$work/prompts.jsonl" --hold "$(( lines < 1000000 ? lines : 1000000 ))"

echo "== ferry train-grpo, one rollout (demo config), peak resident memory"
sft="$work/sft"
"$build/ferry" train-sft --config configs/demo-sft.yaml --set train.max_steps=1 --set output.dir="$sft" \
  --set train.save_every=0 > "$work/sft.log" 2>&1 || { cat "$work/sft.log"; exit 1; }
for file in small prompts; do
  /usr/bin/time -f "%M %e" -o "$work/time.$file" "$build/ferry" train-grpo --config configs/demo-grpo.yaml \
    --set model.path="$sft/final" --set data.prompt_file="$work/$file.jsonl" --set data.eval_file= \
    --set train.max_steps=1 --set train.save_every=0 --set output.dir="$work/grpo-$file" > "$work/grpo-$file.log" 2>&1 ||
    { cat "$work/grpo-$file.log"; exit 1; }
  read -r kib secs < "$work/time.$file"
  echo "RESULT grpo_peak_rss_mib_$file $(( kib / 1024 )) (wall ${secs} s)"
done
