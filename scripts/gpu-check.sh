#!/usr/bin/env bash
# The GPU check: builds Ferry on a machine with a GPU against that machine's own torch, runs the
# CUDA tests (tests/gpu: model and generation, RMSNorm and NF4 dequant kernels, offload policies against the CPU),
# short train-sft / train-rm / train-dpo / train-ppo / train-grpo runs on the GPU, 2-process data parallelism
# (NCCL with 2 GPUs; ZeRO 2 and 3) and the GPU benchmarks (scripts/bench-*-gpu.sh:
# offload within 8 GiB), and writes the results under $OUT (default ./gpu-check-out).
#
# Two steps, one script:
#   scripts/gpu-check.sh --prepare   here (a machine with apt): downloads the Debian packages for
#                                    the C++ libraries into .gpu-debs/ (ignored by git)
#   scripts/gpu-check.sh             there (the GPU machine; no network): unpacks .gpu-debs/ into
#                                    .gpu-deps/ (never into /), builds build-gpu/, runs the checks
# With the device tool: run(command="bash scripts/gpu-check.sh", carry=[".gpu-debs"]).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
debs_dir=$root/.gpu-debs
packages=(libyaml-cpp-dev libyaml-cpp0.7 libsentencepiece-dev libsentencepiece0 libprotobuf-lite32
          libcli11-dev nlohmann-json3-dev libgtest-dev)

if [ "${1:-}" = "--prepare" ]; then
  mkdir -p "$debs_dir"
  grep -qxF '/.gpu-debs/' .git/info/exclude 2>/dev/null || echo '/.gpu-debs/' >> .git/info/exclude
  (cd "$debs_dir" && apt-get download "${packages[@]}" >/dev/null) || { echo "apt-get download failed" >&2; exit 1; }
  ls -la "$debs_dir"
  exit 0
fi

out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"
log=$out/gpu-check.log
exec > >(tee "$log") 2>&1
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
python=${FERRY_GPU_PYTHON:-python3}

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
nvcc --version | tail -1 || true
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())'

echo "== C++ packages from .gpu-debs (unpacked into .gpu-deps, not into /)"
prefix=$root/.gpu-deps
if [ -d "$debs_dir" ]; then
  mkdir -p "$prefix"
  for f in "$debs_dir"/*.deb; do dpkg -x "$f" "$prefix"; done
else
  echo "no .gpu-debs folder: assuming the C++ packages are installed system-wide"
fi
libdir=$prefix/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_SYSROOT_DIR=$prefix PKG_CONFIG_PATH=$libdir/pkgconfig
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "== configure + build"
torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
start=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr;$prefix/usr/lib/x86_64-linux-gnu/cmake" \
  -DTORCH_CUDA_ARCH_LIST="9.0" -DFERRY_PYTHON="$(command -v "$python")" > "$out/configure.log" 2>&1 \
  || { tail -40 "$out/configure.log"; note "configure: FAILED"; exit 1; }
# Device time is short: build the executable and the GPU tests only (the CPU suite runs in CI).
gpu_tests=$(ls tests/gpu/*_test.cpp | xargs -n1 basename | sed 's/\.cpp$//')
cmake --build build-gpu -j "$(nproc)" --target ferry $gpu_tests > "$out/build.log" 2>&1 \
  || { grep -E 'error|Error' "$out/build.log" | head -40; note "build: FAILED"; exit 1; }
note "build: ok in $(( $(date +%s) - start )) s"
build-gpu/ferry version | tee -a "$summary"

echo "== tests: gpu"
(cd build-gpu && ctest -L gpu --output-on-failure -j 4) > "$out/ctest.log" 2>&1
rc=$?
grep -E 'tests passed|tests failed|Failed|Skipped|Passed' "$out/ctest.log" | tee -a "$summary"
note "ctest gpu exit: $rc"

echo "== preference and RL stages on the GPU (a 60-step demo SFT model, again with int8 host moments, 20 QLoRA steps on it (the CUDA NF4 dequantise in training) and 10 with the 4-bit base paged (params), then train-rm, train-dpo, train-ppo and train-grpo, and train-ppo on 2 processes, bf16)"
pref=$out/preference-runs
short="--set train.device=cuda --set train.precision=bf16 --set logging.progress=never --set logging.tensorboard=false"
{
  build-gpu/ferry train-sft --config configs/demo-sft.yaml --set output.dir=$pref/sft --set train.max_steps=60 \
    --set train.eval_every=0 --set train.save_every=0 $short &&
  build-gpu/ferry train-sft --config configs/demo-sft.yaml --set output.dir=$pref/sft-int8 --set train.max_steps=60 \
    --set train.eval_every=0 --set train.save_every=0 $short --set offload.policy=optimizer \
    --set offload.optimizer_state=int8 &&
  build-gpu/ferry train-sft --config configs/demo-sft-qlora.yaml --set model.path=$pref/sft/final \
    --set output.dir=$pref/qlora --set train.max_steps=20 --set train.eval_every=10 --set train.save_every=0 $short &&
  build-gpu/ferry train-sft --config configs/demo-sft-qlora.yaml --set model.path=$pref/sft/final \
    --set output.dir=$pref/qlora-params --set train.max_steps=10 --set train.eval_every=10 --set train.save_every=0 $short \
    --set offload.policy=params &&
  build-gpu/ferry train-rm --config configs/demo-rm.yaml --set model.path=$pref/sft/final --set output.dir=$pref/rm \
    --set train.max_steps=40 --set train.eval_every=20 $short --set offload.policy=optimizer &&
  build-gpu/ferry score --model $pref/rm/final --data data/preference_eval.jsonl --limit 50 &&
  build-gpu/ferry train-dpo --config configs/demo-dpo.yaml --set model.path=$pref/sft/final --set output.dir=$pref/dpo \
    --set train.max_steps=20 --set train.eval_every=10 $short --set offload.policy=params &&
  build-gpu/ferry train-ppo --config configs/demo-ppo.yaml --set model.path=$pref/sft/final --set output.dir=$pref/ppo \
    --set ppo.reward_model=$pref/rm/final --set train.max_steps=10 $short &&
  build-gpu/ferry train-ppo --config configs/demo-ppo.yaml --set model.path=$pref/sft/final --set output.dir=$pref/ppo-params \
    --set ppo.reward_model=$pref/rm/final --set train.max_steps=5 $short --set offload.policy=params --set offload.gpu_memory=16MiB &&
  build-gpu/ferry train-grpo --config configs/demo-grpo.yaml --set model.path=$pref/sft/final --set output.dir=$pref/grpo \
    --set train.max_steps=10 $short &&
  build-gpu/ferry launch --nproc 2 -- train-ppo --config configs/demo-ppo.yaml --set model.path=$pref/sft/final \
    --set output.dir=$pref/ppo-2proc --set ppo.reward_model=$pref/rm/final --set train.max_steps=5 $short \
    --set distributed.zero_stage=2
} > "$out/preference.log" 2>&1
pref_rc=$?
grep -E 'eval step|engine peak|CUDA allocator|preference accuracy|train-(ppo|grpo): (before|after)|error' "$out/preference.log" | tee -a "$summary"
note "preference stages exit: $pref_rc"
rm -rf "$pref"
[ "$pref_rc" = 0 ] || rc=1

echo "== data parallelism on the GPU: 2 processes (c10d NCCL when there are 2 GPUs, else both on one GPU through Gloo), ZeRO 2 and 3 against 1 process with the same global batch, fp32"
dp=$out/dp-runs
dpargs="--config configs/demo-sft.yaml --set train.max_steps=20 --set train.eval_every=0 --set train.save_every=0
  --set train.device=cuda --set logging.progress=never --set logging.tensorboard=false --set train.micro_batch_size=16"
{
  build-gpu/ferry train-sft $dpargs --set output.dir=$dp/one --set train.grad_accumulation=2 &&
  build-gpu/ferry launch --nproc 2 -- train-sft $dpargs --set output.dir=$dp/zero2 --set distributed.zero_stage=2 &&
  build-gpu/ferry launch --nproc 2 -- train-sft $dpargs --set output.dir=$dp/zero3 --set distributed.zero_stage=3 \
    --set offload.policy=params
} > "$out/dp.log" 2>&1
dp_rc=$?
if [ "$dp_rc" = 0 ]; then
  "$python" - "$dp" <<'PY' | tee -a "$summary"
import json, sys
dp = sys.argv[1]
def rows(run):
    return [json.loads(l) for l in open(f"{dp}/{run}/metrics.jsonl") if '"grad_norm"' in l]
one = rows("one")
for run in ("zero2", "zero3"):
    r = rows(run)
    worst = max(abs(a["loss"] - b["loss"]) / a["loss"] for a, b in zip(one, r))
    rate = sum(x["tokens_per_s"] for x in r[5:]) / max(len(r[5:]), 1)
    print(f"dp {run}: {len(r)} steps, worst relative loss difference vs 1 process {worst:.2e}, {rate:.0f} tokens/s "
          f"(1 process: {sum(x['tokens_per_s'] for x in one[5:]) / max(len(one[5:]), 1):.0f})")
PY
else
  tail -20 "$out/dp.log" | tee -a "$summary"
fi
note "data parallel exit: $dp_rc"
rm -rf "$dp"
[ "$dp_rc" = 0 ] || rc=1

echo "== GPU benchmarks"
for bench in scripts/bench-*-gpu.sh; do
  [ -e "$bench" ] || continue
  echo "-- $bench"
  FERRY_BUILD=$root/build-gpu FERRY_PYTHON=$python bash "$bench" 2>&1 | tee -a "$summary"
done
exit $rc
