#!/usr/bin/env bash
# Multi-turn episodes per second (docs/environments.md): `ferry train-grpo` against
# scripts/envs/guess_number.py answering at once, after 50 ms and after 500 ms per request, on the
# same model, prompts and seed (so the same tokens: an episode's samples do not depend on when its
# environment answers). Prints, per delay, the median over rollouts 2-4 of the generation phase
# (policy generating + waiting on environments), episodes/s, how long the policy generated while
# requests were at the environments (generation continuing while environments work), and how much
# the rollout grew against the time each environment worker spent answering.
#
#   scripts/bench-agent.sh [BUILD_DIR] [THREADS]
# The model is SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised; scripts/fetch-smollm2.sh) when it is
# in the cache, else the demo SFT model (runs/demo/sft/final, from scripts/demo.sh), whose turns
# take so little time that a 50 ms environment cannot be hidden. Each rollout: 4 prompts x 4
# episodes, <= 3 turns of <= 16 tokens, 4 environment workers; 4 rollouts, the first dropped.
# FERRY_BENCH_AGENT_DELAYS (default "0 50 500") picks the delays in ms.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
threads="${2:-2}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
ferry="$build/ferry"
[[ -x "$ferry" ]] || { echo "error: $ferry not found; build it first (cmake --build $build)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gguf=${FERRY_DEPS:-$HOME/.cache/ferry}/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [[ -f $gguf ]]; then
  model=(--set model.path="$gguf" --set tokenizer.chat_template=auto)
  name="SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised)"
elif [[ -f $here/runs/demo/sft/final/config.json ]]; then
  model=(--set model.path="$here/runs/demo/sft/final" --set tokenizer.chat_template=demo)
  name="the demo SFT model"
else
  echo "error: no model: run scripts/fetch-smollm2.sh (or scripts/demo.sh for the demo model)" >&2
  exit 2
fi
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; threads $threads"
echo "== GRPO rollouts of multi-turn episodes: $name, 4 prompts x 4 episodes, <= 3 turns x <= 16 tokens"
# Prompts whose secret (gt_answer) the model must find by guessing.
"$python" - "$here/data/prompts_train.jsonl" > "$work/prompts.jsonl" <<'PY'
import json, sys
for i in range(4):
    print(json.dumps({"messages": [{"role": "user", "content": "Guess my secret number between 1 and 20. "
                                    "Answer with one number."}], "gt_answer": str(3 + 5 * i)}))
PY
for delay in ${FERRY_BENCH_AGENT_DELAYS:-0 50 500}; do
  OMP_NUM_THREADS=$threads "$ferry" train-grpo --config "$here/configs/demo-grpo.yaml" "${model[@]}" \
    --set data.prompt_file="$work/prompts.jsonl" --set data.eval_file= --set grpo.num_generations=4 \
    --set grpo.generation_batch_size=16 --set generation.max_new_tokens=16 --set train.max_steps=4 \
    --set train.learning_rate=1e-30 --set train.save_every=0 --set offload.cpu_threads="$threads" \
    --set rewards=[] --set rollout.environment="python3 $here/scripts/envs/guess_number.py --delay-ms $delay" \
    --set rollout.env_workers=4 --set rollout.max_turns=3 --set rollout.max_total_tokens=96 \
    --set output.dir="$work/run$delay" > "$work/run$delay.log" 2>&1 || { tail -20 "$work/run$delay.log" >&2; exit 1; }
done
"$python" - "$work" ${FERRY_BENCH_AGENT_DELAYS:-0 50 500} <<'PY'
import json, statistics, sys
work, delays = sys.argv[1], sys.argv[2:]
base = None
for delay in delays:
    rows = [json.loads(l) for l in open(f"{work}/run{delay}/metrics.jsonl") if '"time/generate"' in l][1:]
    gen = statistics.median(r["time/generate"] for r in rows)
    model = statistics.median(r["time/episode_generate"] for r in rows)
    wait = statistics.median(r["time/env_wait"] for r in rows)
    overlap = statistics.median(r["time/generate_while_env_busy"] for r in rows)
    turns = statistics.median(r["episode/turns"] for r in rows)
    requests_per_worker = 16 * (1 + turns) / 4  # reset and one step per turn, over 4 workers
    env_busy = requests_per_worker * float(delay) / 1000
    line = (f"delay {delay:>3} ms: generation phase {gen:.2f} s ({model:.2f} s generating, {overlap:.2f} s of it while "
            f"environments worked; {wait:.2f} s only waiting), {16 / gen:.2f} episodes/s, {turns:.2f} turns/episode")
    if base is None:
        base = gen
    elif env_busy > 0:
        grew = gen - base
        line += f"; each worker answered for {env_busy:.2f} s, the rollout grew {grew:.2f} s"
    print(line)
tokens = {}
for delay in delays:
    rows = [json.loads(l) for l in open(f"{work}/run{delay}/metrics.jsonl") if '"time/generate"' in l]
    tokens[delay] = [round(r["episode/policy_tokens"], 4) for r in rows]
print("same tokens at every delay:", len({tuple(v) for v in tokens.values()}) == 1)
PY
