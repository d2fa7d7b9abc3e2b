#!/usr/bin/env bash
# How does a reward model rank a policy's own mistakes? A reward model's held-out accuracy on a
# fixed pairs file says little about PPO, whose samples are the policy's answers: this script takes
# the policy's greedy answers to a prompt file with gt_answer (`ferry eval --output`), pairs each
# wrong answer (rejected) with the right one (chosen) in the same context, and scores those pairs
# with the reward model (`ferry score`), which prints the accuracy overall and per task kind.
#
#   scripts/rm-on-policy-pairs.sh [BUILD_DIR] [-- POLICY REWARD_MODEL [PROMPTS]]
#
# Defaults: POLICY runs/demo/sft/final, REWARD_MODEL runs/demo/rm/final (both made by
# scripts/demo.sh), PROMPTS data/prompts_eval.jsonl. Writes runs/rm-on-policy-pairs/{answers,
# pairs}.jsonl. CPU, 2 threads: about a minute on the demo models.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/run-args.sh"
policy=${1:-runs/demo/sft/final}
reward_model=${2:-runs/demo/rm/final}
prompts=${3:-data/prompts_eval.jsonl}
for path in "$policy" "$reward_model" "$prompts"; do
  [[ -e $path ]] || { echo "rm-on-policy-pairs: missing $path (scripts/demo.sh makes the demo models)" >&2; exit 2; }
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
out=runs/rm-on-policy-pairs
mkdir -p "$out"
echo "== the policy's greedy answers: $policy on $prompts"
"$ferry" eval --model "$policy" --prompts "$prompts" --output "$out/answers.jsonl" | sed 's/^/   /'
python3 - "$out/answers.jsonl" "$out/pairs.jsonl" <<'PY'
import json, sys
pairs = 0
with open(sys.argv[1]) as answers, open(sys.argv[2], "w") as out:
    for line in answers:
        row = json.loads(line)
        if row["correct"]:
            continue
        pair = {"context": row["messages"],
                "chosen": [{"role": "assistant", "content": row["gt_answer"]}],
                "rejected": [{"role": "assistant", "content": row["answer"]}]}
        if "kind" in row:
            pair["kind"] = row["kind"]
        out.write(json.dumps(pair) + "\n")
        pairs += 1
print(f"   {pairs} wrong answers paired with the right ones -> {sys.argv[2]}")
PY
echo "== $reward_model on those pairs"
"$ferry" score --model "$reward_model" --data "$out/pairs.jsonl" | sed 's/^/   /'
