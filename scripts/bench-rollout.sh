#!/usr/bin/env bash
# Rollout-shaped generation, Ferry vs transformers, on the same weights, prompts, stop ids and
# thread count: a random model of SmolLM2-135M's shape (30 layers, hidden 576, vocabulary 49 152,
# tied embeddings), batches of 16 and 64 rows made as GRPO makes them (each prompt 4 times,
# prompts of 16-63 tokens, left-padded), greedy, at most 32 new tokens, and stop ids chosen so
# that most rows end early (3/4 of the prompts stop within 3-12 tokens). Prints generated tokens
# per second (up to and including each row's stop) and the ratio; both must produce the same
# tokens. Ferry prefills each prompt once for its 4 copies and drops rows from the batch as they
# stop (src/generate/generate.h); transformers' generate does neither.
#
#   scripts/bench-rollout.sh [BUILD_DIR] [THREADS]
# BUILD_DIR (default build) must contain tests/bench/generate_bench (cmake --build BUILD_DIR
# --target generate_bench). THREADS (default 2) is used by both sides; keep it at or below the
# number of idle cores. FERRY_BENCH_BATCHES (default "16 64") picks the batch sizes.
# At batch 64 it also times continuous batching: the same rows 16 at a time, as static batches of
# 16 against rows joining as others stop (generate_bench --batches-of / --max-rows).
# FERRY_BENCH_BASELINE=PATH also times another build's generate_bench (e.g. an older commit's) on
# the same inputs and prints this build's speed-up over it, greedy and sampled.
# Last, when the real SmolLM2-135M-Instruct GGUF is in the cache (scripts/fetch-smollm2.sh), a GRPO
# rollout's generation (4 prompts x 4 completions, at most 24 tokens, temperature 1: time/generate
# of one `ferry train-grpo` step) against `ferry generate` on the same 16 rows (its own timing line),
# the same with greedy decoding on 64 rows, 16 decoding at a time and the others joining as rows stop
# (the same tokens on both sides: one GRPO rollout of 64 rows with generation.max_batch_rows=16
# against `ferry generate --greedy --batch-size 16` on the same rows, in FERRY_BENCH_PAIRS
# alternating pairs of processes, default 2), the same rows in one process
# (tests/bench/rollout_generate_bench: the rollout's generation phase against generate() on the
# model as `ferry generate` loads it, FERRY_BENCH_REPEATS alternating repeats, default 6, greedy,
# then 4 sampled), then whole GRPO steps against TRL's GRPOTrainer on
# the same shapes (FERRY_BENCH_GRPO=0 skips them; FERRY_BENCH_GRPO_PROMPTS, default 4, sets the
# prompts per step, each with 4 completions; TRL runs without gradient checkpointing, as Ferry does
# by default: FERRY_BENCH_TRL_CHECKPOINTING=1 gives it its own default, on).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
threads="${2:-2}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
bench="$build/tests/bench/generate_bench"
[[ -x "$bench" ]] || { echo "error: $bench not found; build it: cmake --build $build --target generate_bench" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; threads $threads"

for batch in ${FERRY_BENCH_BATCHES:-16 64}; do
  "$python" - "$work" "$threads" "$batch" <<'PY' | tee "$work/hf.txt"
import os, sys, time, statistics
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

work, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
copies, new_tokens = 4, 32
if not os.path.exists(f"{work}/model/config.json"):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                         rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(f"{work}/model")
model = LlamaForCausalLM.from_pretrained(f"{work}/model").eval()
g = torch.Generator().manual_seed(batch)
prompts = []
for _ in range(batch // copies):
    prompt = torch.randint(3, 49152, (int(torch.randint(16, 64, (1,), generator=g)),), generator=g)
    prompts += [prompt] * copies
width = max(len(p) for p in prompts)
ids = torch.zeros(batch, width, dtype=torch.long)
mask = torch.zeros_like(ids)
for row, prompt in enumerate(prompts):
    ids[row, width - len(prompt):] = prompt
    mask[row, width - len(prompt):] = 1

def generate(eos):
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                              pad_token_id=0, eos_token_id=eos)

# Stop ids: for 3 prompts in 4, the token its greedy continuation reaches at step 3-12.
free = generate(None)[:, width:]
stops = set()
for p in range(batch // copies):
    if int(torch.randint(0, 4, (1,), generator=g)) < 3:
        stops.add(int(free[p * copies, int(torch.randint(3, 13, (1,), generator=g))]))
stops = sorted(stops - {0})
generate(stops)  # warm-up
times = []
for _ in range(3):
    start = time.perf_counter()
    out = generate(stops)
    times.append(time.perf_counter() - start)
median = statistics.median(times)
new = out[:, width:]
is_stop = torch.isin(new, torch.tensor(stops))
ended = is_stop.int().cumsum(1) - is_stop.int()  # >0 after a row's first stop
counted = int(((ended == 0) & (torch.arange(new.shape[1]) < new_tokens)).sum())
save_file({"input_ids": ids, "attention_mask": mask}, f"{work}/prompts.safetensors")
save_file({"tokens": out.contiguous()}, f"{work}/hf_tokens.safetensors")
with open(f"{work}/stops.txt", "w") as f:
    f.write(",".join(map(str, stops)))
print(f"transformers {__import__('transformers').__version__}: batch {batch} ({batch // copies} prompts x {copies}), "
      f"prompt width {width}, at most {new_tokens} new tokens, {counted} generated: median {median:.3f} s, "
      f"{counted / median:.1f} tokens/s")
print(f"hf_tokens_per_s={counted / median}")
PY
  "$bench" --model "$work/model" --prompts "$work/prompts.safetensors" --threads "$threads" --new-tokens 32 \
           --eos "$(cat "$work/stops.txt")" --tokens-out "$work/ferry_tokens.safetensors" | tee "$work/ferry.txt"
  # As rollouts sample: temperature 1, one generator per row (other tokens, so only its own figure).
  "$bench" --model "$work/model" --prompts "$work/prompts.safetensors" --threads "$threads" --new-tokens 32 \
           --eos "$(cat "$work/stops.txt")" --sample 1 | sed 's/^ferry/ferry sampled/' | head -1
  if [[ -n "${FERRY_BENCH_BASELINE:-}" ]]; then
    "$FERRY_BENCH_BASELINE" --model "$work/model" --prompts "$work/prompts.safetensors" --threads "$threads" \
      --new-tokens 32 --eos "$(cat "$work/stops.txt")" | sed 's/^ferry/baseline/' | tee "$work/baseline.txt"
    # Sampled, both builds, without stop ids: every row decodes all 32 tokens, so both sides do the
    # same work although their samplers may draw other tokens.
    for side in this baseline; do
      binary=$bench; [[ $side == baseline ]] && binary=$FERRY_BENCH_BASELINE
      "$binary" --model "$work/model" --prompts "$work/prompts.safetensors" --threads "$threads" --new-tokens 32 \
        --sample 1 | sed -e "s/^ferry_tokens_per_s/sampled_${side}_tokens_per_s/" \
        -e "s/^ferry:/$side build, sampled, no stop ids:/" > "$work/sampled-$side.txt"
      head -1 "$work/sampled-$side.txt"
    done
  fi
  if (( batch > 16 )); then
    # Continuous batching: the same rows, 16 decoding at a time, as static batches of 16 (each runs
    # until its longest row ends: what `ferry generate --batch-size 16` did before) and with rows
    # joining as others stop (generation.max_batch_rows, `ferry generate --batch-size`), in 3
    # alternating pairs of processes; both must give the same tokens.
    for pair in 1 2 3; do
      for scheme in static joining; do
        [[ $pair == 2 ]] && scheme=$([[ $scheme == static ]] && echo joining || echo static)
        flag=(--batches-of 16); [[ $scheme == joining ]] && flag=(--max-rows 16)
        "$bench" --model "$work/model" --prompts "$work/prompts.safetensors" --threads "$threads" --new-tokens 32 \
          --eos "$(cat "$work/stops.txt")" "${flag[@]}" --tokens-out "$work/tokens-$scheme.safetensors" \
          > "$work/continuous-run.txt"
        cat "$work/continuous-run.txt" >> "$work/continuous.txt"
        head -1 "$work/continuous-run.txt"
      done
    done
    "$python" - "$work" <<'PY'
import re, statistics, sys
from safetensors.torch import load_file
work = sys.argv[1]
same = bool((load_file(f"{work}/tokens-static.safetensors")["tokens"] ==
             load_file(f"{work}/tokens-joining.safetensors")["tokens"]).all())
rates = {"static": [], "joining": []}
for line in open(f"{work}/continuous.txt"):
    if line.startswith("ferry:"):
        scheme = "joining" if "rows joining" in line else "static"
        rates[scheme].append(float(re.search(r"([0-9.]+) tokens/s", line).group(1)))
static, joining = statistics.median(rates["static"]), statistics.median(rates["joining"])
print(f"continuous batching, 16 rows at a time: rows joining {joining:.1f} tokens/s, static batches of 16 "
      f"{static:.1f} tokens/s (medians of 3): {joining / static:.2f}x; same tokens: {same}")
PY
  fi
  "$python" - "$work" <<'PY'
import sys
from safetensors.torch import load_file
work = sys.argv[1]
hf = load_file(f"{work}/hf_tokens.safetensors")["tokens"]
ferry = load_file(f"{work}/ferry_tokens.safetensors")["tokens"]
width = min(hf.shape[1], ferry.shape[1])
same = hf.shape == ferry.shape and bool((hf == ferry).all())
print(f"same tokens as transformers: {same}")
def figure(file, key):
    for line in open(file):
        if line.startswith(key + "="):
            return float(line.split("=", 1)[1])
hf_rate, ferry_rate = figure(f"{work}/hf.txt", "hf_tokens_per_s"), figure(f"{work}/ferry.txt", "ferry_tokens_per_s")
print(f"tokens/s: ferry {ferry_rate:.1f}, transformers {hf_rate:.1f}, ratio ferry/transformers {ferry_rate / hf_rate:.2f}")
try:
    base = figure(f"{work}/baseline.txt", "baseline_tokens_per_s")
    print(f"baseline build {base:.1f} tokens/s: this build {ferry_rate / base:.2f}x")
    rate = lambda side: figure(f"{work}/sampled-{side}.txt", f"sampled_{side}_tokens_per_s")
    print(f"sampled, no stop ids: this build {rate('this'):.1f} tokens/s, baseline {rate('baseline'):.1f}: "
          f"this build {rate('this') / rate('baseline'):.2f}x")
except FileNotFoundError:
    pass
PY
done

gguf=${FERRY_DEPS:-$HOME/.cache/ferry}/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
ferry="$build/ferry"
if [[ -f $gguf && -x $ferry ]]; then
  echo "== RL generation against ferry generate: SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised), 4 prompts x 4"
  head -4 "$here/data/prompts_train.jsonl" > "$work/prompts4.jsonl"
  "$python" -c 'import sys, json
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\n".join(json.dumps({"messages": r["messages"]}) for r in rows for _ in range(4)))' "$work/prompts4.jsonl" \
    > "$work/prompts16.jsonl"
  OMP_NUM_THREADS=$threads "$ferry" generate --model "$gguf" --chat --prompts "$work/prompts16.jsonl" --temperature 1 \
    --max-new-tokens 24 --batch-size 16 --output "$work/generated.jsonl" 2>&1 | grep '^generated' | sed 's/^/ferry generate: /'
  OMP_NUM_THREADS=$threads "$ferry" train-grpo --config "$here/configs/demo-grpo.yaml" --set model.path="$gguf" \
    --set tokenizer.chat_template=auto --set data.prompt_file="$work/prompts4.jsonl" --set data.eval_file= \
    --set grpo.num_generations=4 --set grpo.generation_batch_size=16 --set generation.max_new_tokens=24 \
    --set train.max_steps=1 --set train.save_every=0 --set offload.cpu_threads="$threads" \
    --set output.dir="$work/grpo" > "$work/grpo.log" 2>&1 || { tail -20 "$work/grpo.log" >&2; exit 1; }
  "$python" - "$work/grpo/metrics.jsonl" <<'PY'
import json, sys
row = [json.loads(line) for line in open(sys.argv[1])][-1]
print(f"train-grpo rollout: {row['time/generate']:.2f} s generating, {row['tokens_per_s/generate']:.1f} tokens/s")
PY
  # Greedy, the same tokens on both sides, the same work in each process: `ferry generate --greedy
  # --batch-size 16` on 64 rows (the 4 prompts x 4 copies, four times over), 16 decoding at a time
  # and the others joining as rows stop, against one `ferry train-grpo` rollout of the same 64 rows
  # in the same order (16 prompt lines, unshuffled, 4 completions each) with
  # generation.max_batch_rows=16: one generate() call in each process, both the first of their
  # process (so both pay for fresh memory). FERRY_BENCH_PAIRS (default 4) such pairs of processes,
  # in alternating order (a VM's speed drifts between processes: by a few % on one host, by up to
  # 30% on another).
  for _ in 1 2 3 4; do cat "$work/prompts16.jsonl"; done > "$work/prompts64.jsonl"
  for _ in 1 2 3 4; do cat "$work/prompts4.jsonl"; done > "$work/prompt-lines16.jsonl"
  generate_greedy() {
    OMP_NUM_THREADS=$threads "$ferry" generate --model "$gguf" --chat --prompts "$work/prompts64.jsonl" --greedy \
      --max-new-tokens 24 --batch-size 16 --output "$work/generated-greedy.jsonl" 2>&1 | grep '^generated' \
      >> "$work/generate-greedy.txt"
  }
  rollouts_greedy() {
    rm -rf "$work/grpo-greedy"
    OMP_NUM_THREADS=$threads "$ferry" train-grpo --config "$here/configs/demo-grpo.yaml" --set model.path="$gguf" \
      --set tokenizer.chat_template=auto --set data.prompt_file="$work/prompt-lines16.jsonl" --set data.eval_file= \
      --set data.shuffle=false --set grpo.num_generations=4 --set grpo.generation_batch_size=64 \
      --set generation.max_new_tokens=24 --set generation.max_batch_rows=16 --set generation.greedy=true \
      --set train.max_steps=1 --set train.save_every=0 \
      --set offload.cpu_threads="$threads" --set output.dir="$work/grpo-greedy" > "$work/grpo-greedy.log" 2>&1 \
      || { tail -20 "$work/grpo-greedy.log" >&2; exit 1; }
    "$python" -c 'import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "time/generate" in r]
print(json.dumps([rows[0]["time/generate"], round(rows[0]["time/generate"] * rows[0]["tokens_per_s/generate"])]))' \
      "$work/grpo-greedy/metrics.jsonl" >> "$work/rollouts-greedy.txt"
  }
  for pair in $(seq 1 "${FERRY_BENCH_PAIRS:-2}"); do
    if (( pair % 2 )); then generate_greedy; rollouts_greedy; else rollouts_greedy; generate_greedy; fi
  done
  "$python" - "$work" <<'PY'
import json, re, statistics, sys
work = sys.argv[1]
generate = [re.search(r"generated (\d+) tokens in ([0-9.e+-]+) s", line).groups()
            for line in open(f"{work}/generate-greedy.txt")]
rollouts = [json.loads(line) for line in open(f"{work}/rollouts-greedy.txt")]
ratios = []
for (tokens, seconds), (rl_seconds, rl_tokens) in zip(generate, rollouts):
    assert rl_tokens == int(tokens), f"different tokens: ferry generate {tokens}, train-grpo {rl_tokens}"
    ratios.append(float(seconds) / rl_seconds)
    print(f"pair {len(ratios)}: ferry generate {float(seconds):.3f} s, train-grpo rollout {rl_seconds:.3f} s "
          f"({rl_tokens} tokens each): RL / generate speed {ratios[-1]:.3f}")
print(f"greedy, 64 rows 16 at a time, the same {generate[0][0]} tokens: RL generation speed / ferry generate: "
      f"median {statistics.median(ratios):.3f}, ratio of the totals "
      f"{sum(float(s) for _, s in generate) / sum(s for s, _ in rollouts):.3f} (target >= 1)")
PY
  # Between processes this host's speed drifts by more than the difference asked about; in one
  # process both sides see the same machine: the rollout's generation phase (ExperienceMaker, on the
  # policy as train-grpo sets it up) against generate() on the model as `ferry generate` loads it,
  # the same rows, options and row generators, alternating which goes first; the same tokens.
  in_process=$build/tests/bench/rollout_generate_bench
  if [[ -x $in_process ]]; then
    rollout_settings=(--config "$here/configs/demo-grpo.yaml" --set model.path="$gguf"
      --set tokenizer.chat_template=auto
      --set data.prompt_file="$work/prompt-lines16.jsonl" --set data.eval_file= --set data.shuffle=false
      --set grpo.num_generations=4 --set grpo.generation_batch_size=64 --set generation.max_new_tokens=24
      --set generation.max_batch_rows=16 --set offload.cpu_threads="$threads")
    echo "== the same 64 rows in one process (rollout_generate_bench), greedy"
    OMP_NUM_THREADS=$threads "$in_process" "${rollout_settings[@]}" --set generation.greedy=true \
      --repeats "${FERRY_BENCH_REPEATS:-6}" > "$work/in-process.txt" 2>&1 \
      || { tail -20 "$work/in-process.txt" >&2; exit 1; }
    grep -E '^(repeat|in one process)' "$work/in-process.txt"
    echo "== the same 64 rows in one process, sampled (temperature 1, the rollout's row generators)"
    OMP_NUM_THREADS=$threads "$in_process" "${rollout_settings[@]}" --repeats 4 > "$work/in-process.txt" 2>&1 \
      || { tail -20 "$work/in-process.txt" >&2; exit 1; }
    grep -E '^(repeat|in one process)' "$work/in-process.txt"
  else
    echo "(no $in_process: the in-process comparison is skipped; cmake --build $build --target rollout_generate_bench)"
  fi
  # Whole GRPO steps (rollout: generate, score, learn, one optimizer step) against TRL's
  # GRPOTrainer on the same model, prompts and shapes: 4 prompts x 4 completions, at most 24 new
  # tokens, temperature 1, beta 0, a verifier that scores 1 when the answer contains gt_answer
  # (so groups differ and both learn); 4 steps each, the first one dropped (warm-up), median of
  # the other 3. FERRY_BENCH_GRPO=0 skips it (~2 min on 2 cores).
  if [[ ${FERRY_BENCH_GRPO:-1} == 1 ]]; then
    prompts=${FERRY_BENCH_GRPO_PROMPTS:-4}
    rows=$((prompts * 4))
    head -"$prompts" "$here/data/prompts_train.jsonl" > "$work/grpo-prompts.jsonl"
    echo "== GRPO steps against TRL's GRPOTrainer: SmolLM2-135M-Instruct, $prompts prompts x 4, <= 24 new tokens"
    OMP_NUM_THREADS=$threads "$ferry" train-grpo --config "$here/configs/demo-grpo.yaml" --set model.path="$gguf" \
      --set tokenizer.chat_template=auto --set data.prompt_file="$work/grpo-prompts.jsonl" --set data.eval_file= \
      --set grpo.num_generations=4 --set grpo.generation_batch_size="$rows" --set generation.max_new_tokens=24 \
      --set train.micro_batch_size=16 --set train.grad_accumulation=$((rows / 16)) --set train.max_steps=4 \
      --set train.save_every=0 \
      --set 'rewards=[{kind: verifier, match: contains}]' \
      --set offload.cpu_threads="$threads" --set output.dir="$work/grpo4" > "$work/grpo4.log" 2>&1 \
      || { tail -20 "$work/grpo4.log" >&2; exit 1; }
    "$python" - "$work" "$gguf" "$threads" "$rows" <<'PY'
import json, os, statistics, sys, time
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer, __version__ as trl_version

work, gguf, threads, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
rows = [json.loads(line) for line in open(f"{work}/grpo-prompts.jsonl")]
ferry_rows = [r for r in map(json.loads, open(f"{work}/grpo4/metrics.jsonl")) if "time/rollout" in r]
ferry_steps = [r["time/rollout"] for r in ferry_rows]
folder, name = os.path.dirname(gguf), os.path.basename(gguf)
tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
# The GGUF's weights, dequantised to fp32 into a plain model (transformers marks a GGUF-loaded model
# as quantised, which its Trainer refuses to train without adapters).
loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
config = loaded.config
if hasattr(config, "quantization_config"):
    del config.quantization_config
model = type(loaded)(config)
model.load_state_dict(loaded.state_dict())
del loaded
data = Dataset.from_list([{"prompt": r["messages"], "gt_answer": r["gt_answer"]} for r in rows])

def contains(completions, gt_answer, **kwargs):
    return [float(a.strip() in c[0]["content"]) for c, a in zip(completions, gt_answer)]

class StepClock(TrainerCallback):
    def __init__(self):
        self.seconds, self.rewards = [], []
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            self.rewards.append(float(logs["reward"]))
    def on_step_begin(self, args, state, control, **kwargs):
        self.start = time.perf_counter()
    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self.start)

clock = StepClock()
config = GRPOConfig(output_dir=f"{work}/trl", per_device_train_batch_size=batch, num_generations=4,
                    generation_batch_size=batch, max_completion_length=24, temperature=1.0, beta=0.0,
                    learning_rate=3e-5, lr_scheduler_type="constant", max_steps=4, logging_steps=1,
                    save_strategy="no", report_to=[], use_cpu=True, bf16=False, seed=1,
                    dataloader_num_workers=0, disable_tqdm=True,
                    gradient_checkpointing=os.environ.get("FERRY_BENCH_TRL_CHECKPOINTING", "0") == "1")
trainer = GRPOTrainer(model=model, reward_funcs=[contains], args=config, train_dataset=data,
                      processing_class=tokenizer, callbacks=[clock])
trainer.train()
ours, theirs = statistics.median(ferry_steps[1:]), statistics.median(clock.seconds[1:])
print(f"ferry train-grpo: {', '.join(f'{s:.2f}' for s in ferry_steps)} s per rollout; median after the first {ours:.2f} s")
for key in ("time/generate", "time/score", "time/learn", "reward/mean", "reward"):
    values = [r[key] for r in ferry_rows if key in r]
    if values:
        print(f"  ferry {key}: {', '.join(f'{v:.2f}' for v in values)}")
print(f"  TRL mean reward per step: {', '.join(f'{v:.2f}' for v in clock.rewards)}")
print(f"TRL {trl_version} GRPOTrainer (gradient_checkpointing={config.gradient_checkpointing}): {', '.join(f'{s:.2f}' for s in clock.seconds)} s per step; "
      f"median after the first {theirs:.2f} s")
print(f"GRPO step: ratio TRL/ferry {theirs / ours:.2f}x")
PY
  fi
else
  echo "(no SmolLM2 GGUF in the cache or no $ferry: the RL generation comparison is skipped; scripts/fetch-smollm2.sh)"
fi
