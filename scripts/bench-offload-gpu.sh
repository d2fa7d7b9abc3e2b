#!/usr/bin/env bash
# Offload on a GPU: with the device capped at a budget (default 8 GiB: offload.gpu_memory, which
# also caps the CUDA caching allocator), the largest Llama-shaped model that full-fine-tunes under
# each policy (none, optimizer, params), and its tokens/s; then the optimizer run's model without
# clipping, with the CPU AdamW after backward and overlapped with it (offload.overlap_step).
#
# For each policy, `ferry plan` picks the largest model of the ladder below that it estimates to
# fit; `ferry train-sft` then trains that model for a few steps (bf16, random init, the demo data
# packed into 512-token sequences) and the script prints tokens/s (mean of the steps after the
# first), the engine's peak and the allocator's real peak. A run that does not fit is reported
# with its error (exit 2). Loss agreement with the CPU path is tests/gpu/train_offload_cuda_test.
#
#   scripts/bench-offload-gpu.sh                      (build dir: FERRY_BUILD, default build)
# Environment: FERRY_BENCH_BUDGET (8GiB), FERRY_BENCH_STEPS (4), FERRY_BENCH_DEVICE (cuda; `cpu`
# checks the script itself on a machine without a GPU, with FERRY_BENCH_LADDER=tiny),
# FERRY_BENCH_LADDER (llama: 160M..3B; tiny: three small shapes), FERRY_BENCH_HOST_GIB (host memory
# the run may use; models whose host footprint is larger are skipped; default: 80% of MemTotal).
# Host memory bounds `params`: ~17 bytes per parameter on the host for bf16 full fine-tuning.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${FERRY_BUILD:-build}
ferry=$build/ferry
budget=${FERRY_BENCH_BUDGET:-8GiB}
steps=${FERRY_BENCH_STEPS:-4}
device=${FERRY_BENCH_DEVICE:-cuda}
ladder=${FERRY_BENCH_LADDER:-llama}
python=${FERRY_PYTHON:-python3}
host_gib=${FERRY_BENCH_HOST_GIB:-$(awk '/MemTotal/ {printf "%d", $2 * 0.8 / 1048576}' /proc/meminfo)}
[ -x "$ferry" ] || { echo "no $ferry: build first (cmake --build $build)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name hidden intermediate layers heads kv_heads vocab
if [ "$ladder" = tiny ]; then
  shapes=("t1 64 176 2 4 2 2000" "t2 128 352 4 4 4 2000" "t3 256 704 6 8 4 2000")
  seq=64
else
  shapes=("160M 768 2048 12 12 12 32000" "410M 1024 2816 24 16 16 32000" "1.1B 2048 5632 22 32 4 32000"
          "1.7B 2048 5632 36 32 8 32000" "3.2B 3072 8192 28 24 8 32000")
  seq=512
fi

write_config() {  # name hidden intermediate layers heads kv vocab -> $work/<name>.json
  cat > "$work/$1.json" <<JSON
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": $2, "intermediate_size": $3,
 "num_hidden_layers": $4, "num_attention_heads": $5, "num_key_value_heads": $6, "vocab_size": $7,
 "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
 "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3, "torch_dtype": "bfloat16"}
JSON
}

common=(--config configs/demo-sft.yaml --set data.packing=true --set data.max_length=$seq
        --set data.eval_file= --set data.eval_fraction=0 --set train.precision=bf16
        --set train.micro_batch_size=2 --set train.grad_accumulation=2 --set train.device=$device
        --set train.gradient_checkpointing=true --set train.save_every=0 --set logging.progress=never
        --set logging.tensorboard=false)
plan_extra=()
if [ "$device" = cpu ]; then  # the script's own check: fp32, an emulated device without a CUDA context
  common+=(--set train.precision=fp32)
  plan_extra=(--device-overhead 0)
fi

train_and_report() {  # label policy model [--set k=v ...]: trains, appends one line to $results
  local label=$1 policy=$2 chosen=$3
  shift 3
  local extra=("$@")
  local slug=${label//[^a-zA-Z0-9]/_}
  local out=$work/run-$slug
  local log=$work/$slug.log
  local start=$(date +%s)
  "$ferry" train-sft "${common[@]}" --set model.config="$work/$chosen.json" --set offload.policy=$policy \
    "${extra[@]}" --set offload.gpu_memory="$budget" --set train.max_steps="$steps" --set output.dir="$out" > "$log" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - start ))
  if [ $rc -ne 0 ]; then
    echo "$label: $chosen FAILED (exit $rc after ${seconds} s): $(grep -m1 -i 'error' "$log")" | tee -a "$results"
    tail -5 "$log"
    return
  fi
  "$python" - "$label" "$chosen" "$out/metrics.jsonl" "$log" "$seconds" <<'PY' | tee -a "$results"
import json, re, sys
policy, name, metrics, log, seconds = sys.argv[1:]
rows = [json.loads(l) for l in open(metrics) if '"loss"' in l and '"eval_loss"' not in l]
rates = [r["tokens_per_s"] for r in rows[1:]] or [r["tokens_per_s"] for r in rows]
text = open(log).read()
params = re.search(r"model (\d+) parameters", text)
engine = re.search(r"engine peak.*?: (.*) on the device, (.*) on the host", text)
alloc = re.search(r"CUDA allocator peak.*?: (\S+ \S+) reserved", text)
print(f"{policy}: {name} ({int(params.group(1)) / 1e6:,.1f} M params) trains: "
      f"{sum(rates) / len(rates):,.0f} tokens/s, loss {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f}; "
      f"engine peak {engine.group(1)} device / {engine.group(2)} host"
      + (f"; allocator peak {alloc.group(1)}" if alloc else "") + f"; {seconds} s with start-up")
PY
}

echo "== offload on $device within $budget: largest model per policy ($steps steps, bf16, $seq tokens x 4 per step)"
results=$work/results.txt
: > "$results"
for policy in none optimizer params; do
  chosen=""
  for shape in "${shapes[@]}"; do
    read -r name hidden inter layers heads kv vocab <<< "$shape"
    write_config "$name" "$hidden" "$inter" "$layers" "$heads" "$kv" "$vocab"
    plan=$("$ferry" plan "${common[@]}" --set model.config="$work/$name.json" --set offload.policy=$policy \
             --gpu-memory "$budget" "${plan_extra[@]}" 2>&1)
    if [ $? -ne 0 ]; then
      echo "$policy: $name does not fit by the plan ($(echo "$plan" | grep -m1 'smallest device footprint' | sed 's/.*smallest/smallest/'))"
      break
    fi
    host_gib_needed=$(echo "$plan" | "$python" -c '
import re, sys
units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
for line in sys.stdin:
    m = re.match(r"\s+total\s+\S+ \S+\s+(\S+) (\S+)", line)
    if m:
        print(int(float(m.group(1)) * units[m.group(2)] / 2**30 + 1))
        break
else:
    print(0)')
    if [ "$host_gib_needed" -gt "$host_gib" ]; then
      echo "$policy: $name fits the device by the plan but needs ~${host_gib_needed} GiB on the host (${host_gib} GiB usable here)"
      break
    fi
    chosen=$name
  done
  if [ -z "$chosen" ]; then
    echo "$policy: nothing in the ladder fits $budget" | tee -a "$results"
    continue
  fi
  train_and_report "$policy" "$policy" "$chosen"
  [ "$policy" = optimizer ] && optimizer_model=$chosen
done
# offload.overlap_step: the same optimizer run without clipping, with the CPU AdamW after backward
# and during it.
if [ -n "${optimizer_model:-}" ]; then
  echo "== optimizer without clipping ($optimizer_model): AdamW after backward, then during it (offload.overlap_step)"
  train_and_report "optimizer, no clipping" optimizer "$optimizer_model" --set train.max_grad_norm=0
  train_and_report "optimizer, no clipping, overlap_step" optimizer "$optimizer_model" --set train.max_grad_norm=0 \
    --set offload.overlap_step=true
fi
echo "== summary"
cat "$results"
