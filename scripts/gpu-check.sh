#!/usr/bin/env bash
# The GPU check: builds Ferry on a machine with a GPU against that machine's own torch and runs, in
# order of value, each part under its own time limit: the build, the CUDA unit tests (model and
# generation, RMSNorm, chunked LM head, NF4 dequant), the offload policies against the CPU, short
# train-sft / train-rm / train-dpo / train-ppo / train-grpo runs (and train-ppo on 2 processes),
# 2-process data parallelism (ZeRO 2 and 3), decoding with and without CUDA graphs and the other GPU
# benchmarks (scripts/bench-*-gpu.sh).
# Results go under $OUT (default ./gpu-check-out): summary.txt gets a line per part as it ends, so
# a run cut short still brings back what finished; each part's output is in <part>.log.
#
#   scripts/gpu-check.sh --prepare   here (a machine with apt): downloads the `lib` packages of
#                                    scripts/debian-packages.txt into .gpu-debs/ (ignored by git)
#   scripts/gpu-check.sh --dry-run   here, in CI (scripts/test.sh): proves the GPU build cannot fail
#                                    on a missing package (below)
#   scripts/gpu-check.sh             there (the GPU machine; no network, no Debian -dev packages):
#                                    unpacks .gpu-debs/ into .gpu-deps/ (never into /) and runs the parts
# With the device tool: run(command="bash scripts/gpu-check.sh", carry=[".gpu-debs"], timeout_s=600).
#
# The time budget (an H100 machine has 16 cores; the whole run must end within 8 minutes when
# nothing fails, leaving device time to run it again): see the `part` lines below and README's
# "GPU check" for how each limit was estimated.
#
# --dry-run unpacks the carried packages into a scratch folder and configures the GPU run's build
# there with CMake looking only in that folder and the torch wheel (the system's /usr and / are
# ignored as search prefixes). It does not compile everything a second time (that took ~23 minutes
# of CI's 2 cores): it compiles the CUDA kernels for real, runs every other compile command of the
# GPU run's targets (ferry, generate_bench, the GPU tests) as a header scan (`-M`: a header that is
# not found fails it), and runs every link command of theirs with a one-line main in place of the
# project's objects (a library that is not found fails it). Then it checks that every header the
# scan read from the system belongs to the C/C++ toolchain (not to a library the GPU machine lacks),
# that every shared library the linked programs load resolves inside the carried folder, the torch
# wheel, the CUDA toolkit or the C runtime (and that they start), and that the working tree plus
# .gpu-debs stays under the device tool's 64 MiB carry limit.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source "$root/scripts/debian-packages.sh"
debs_dir=$root/.gpu-debs
carry_limit=$((64 * 1024 * 1024))

prepare() { prepare_debs && prepare_pyarrow; }

prepare_debs() {  # downloads the carried packages (again when the list changed)
  local stamp=$debs_dir/.list
  local want
  want=$(debian_packages carry | tr '\n' ' ')
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  rm -rf "$debs_dir" && mkdir -p "$debs_dir"
  # shellcheck disable=SC2086
  (cd "$debs_dir" && { apt-get download -q $want >/dev/null 2>&1 ||
                       { apt-get update -qq >/dev/null && apt-get download -q $want >/dev/null; }; }) ||
    { echo "gpu-check: apt-get download of the carried packages failed: $want" >&2; return 1; }
  echo "$want" > "$stamp"
}

# Apache Arrow's C++ libraries and headers (ferry::arrow) come from the pyarrow wheel, which the GPU
# machine's Python may lack: the deps venv's libarrow, libparquet and their headers travel in
# .gpu-debs/pyarrow-<version>.tar.xz (~15 MiB) and unpack to <prefix>/pyarrow, which configure names.
prepare_pyarrow() {
  local python=${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}
  local dir version
  read -r dir version < <("$python" -c 'import os, pyarrow; print(os.path.dirname(pyarrow.__file__), pyarrow.__version__)') ||
    { echo "gpu-check: $python has no pyarrow: run scripts/deps.sh" >&2; return 1; }
  local tarball=$debs_dir/pyarrow-$version.tar.xz
  [ -f "$tarball" ] && return 0
  rm -f "$debs_dir"/pyarrow-*.tar.xz
  (cd "$(dirname "$dir")" && tar -cf - pyarrow/include/arrow pyarrow/include/parquet pyarrow/libarrow.so.* \
     pyarrow/libparquet.so.*) | xz -T0 -6 > "$tarball.tmp" && mv "$tarball.tmp" "$tarball"
}

unpack() {  # unpacks .gpu-debs/*.deb into $1 (a folder of its own, never /): dpkg -x, or ar + tar
  rm -rf "$1" && mkdir -p "$1"
  local f member
  for f in "$debs_dir"/*.deb; do
    if command -v dpkg > /dev/null; then
      dpkg -x "$f" "$1" || return 1
    else
      member=$(ar t "$f" | grep '^data\.tar') || return 1
      ar p "$f" "$member" | tar -x -a -f - -C "$1" 2>/dev/null || ar p "$f" "$member" | tar -x -J -f - -C "$1" || return 1
    fi
  done
  for f in "$debs_dir"/pyarrow-*.tar.xz; do  # -> $1/pyarrow (without xz: Python's tarfile)
    [ -e "$f" ] || continue
    tar -x -J -f "$f" -C "$1" 2>/dev/null ||
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$f" "$1" || return 1
  done
}

# configure BUILD PREFIX PYTHON LOG: CMake sees only PREFIX (the unpacked packages), the torch of
# PYTHON and the CUDA toolkit; the system's /usr and / are ignored as prefixes.
configure() {
  local build=$1 prefix=$2 python=$3 log=$4
  local torch_prefix
  torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') || return 1
  # nvcc named outright: the ignored prefixes must not hide a toolkit installed under /usr.
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  # Arrow: the carried pyarrow (prepare_pyarrow) when it is there, else the Python's own.
  local arrow=()
  [ -d "$prefix/pyarrow" ] && arrow=(-DFERRY_PYARROW_DIR="$prefix/pyarrow")
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" -DCMAKE_IGNORE_PREFIX_PATH="/usr;/" \
    -DFERRY_CCACHE="${FERRY_GPU_CCACHE:-OFF}" -DTORCH_CUDA_ARCH_LIST="${FERRY_GPU_ARCH:-9.0}" \
    -DFERRY_PYTHON="$(command -v "$python")" "${arrow[@]}" > "$log" 2>&1 || { tail -30 "$log"; return 1; }
  # Data parallelism needs Gloo's headers: without them CMake only warns, and the GPU runs would fail.
  grep -q 'data parallelism (c10d Gloo) ON' "$log" || { echo "configure: Gloo headers not found (libgloo-dev)"; return 1; }
}

# configure_and_build BUILD PREFIX PYTHON LOG TARGET...: configure, then build TARGETs.
configure_and_build() {
  local build=$1 log=$4
  configure "$1" "$2" "$3" "$4" || return 1
  shift 4
  cmake --build "$build" -j "$(nproc)" $(printf -- '--target %s ' "$@") >> "$log" 2>&1 ||
    { grep -E -m 20 'error|Error' "$log"; return 1; }
}

# scan_and_link BUILD PREFIX PYTHON TARGET...: every C++ compile command ninja would run for TARGETs,
# run as a header scan (-M into BUILD/scan/*.d; headers.txt lists every header read), and every link
# command, run with BUILD/scan/probe.o (an empty main) in place of the objects and libraries built
# here (PREFIX's archives stay), into BUILD/scan/<program>.probe, linked --no-as-needed: each probe
# needs every shared library its program links. CUDA compile commands are left to the real build.
scan_and_link() {
  local build=$1 prefix=$2 python=$3
  shift 3
  ninja -C "$build" -t commands "$@" > "$build/commands.txt" || return 1
  "$python" - "$build" "$prefix" "$(nproc)" <<'PY'
import concurrent.futures, os, shlex, shutil, subprocess, sys

build, prefix, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
scan = os.path.join(build, "scan")
shutil.rmtree(scan, ignore_errors=True)  # no .d file or probe of an earlier run may count
os.makedirs(scan)
compiles, links = [], []
for line in open(os.path.join(build, "commands.txt")):
    argv = [a for a in shlex.split(line) if a not in (":", "&&")]
    if not argv or not argv[0].endswith(("c++", "g++", "clang++")) or "-o" not in argv:
        continue  # archives (ar, ranlib), cmake -E steps, nvcc
    (compiles if "-c" in argv else links).append(argv)

def scan_one(item):
    n, argv = item
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("-o", "-include", "-MF", "-MT"):
            skip = True
        elif a not in ("-c", "-MD", "-Winvalid-pch"):
            out.append(a)
    r = subprocess.run(out + ["-M", "-MF", os.path.join(scan, f"{n}.d")], cwd=build,
                       capture_output=True, text=True)
    return r.returncode, argv[-1], r.stderr

failed = 0
with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
    for rc, source, err in pool.map(scan_one, enumerate(compiles)):
        if rc:
            failed += 1
            print(f"header scan of {source} failed:\n" + "\n".join(err.splitlines()[:8]))
headers = set()
for name in os.listdir(scan):
    if name.endswith(".d"):
        text = open(os.path.join(scan, name)).read().replace("\\\n", " ")
        headers.update(text.split(":", 1)[1].split())
with open(os.path.join(scan, "headers.txt"), "w") as f:
    f.write("".join(h + "\n" for h in sorted(headers)))

probe = os.path.join(scan, "probe.o")
open(os.path.join(scan, "probe.cpp"), "w").write("int main() { return 0; }\n")
subprocess.run(["c++", "-c", "-o", probe, os.path.join(scan, "probe.cpp")], check=True)
def built_here(a):  # objects and archives of this build (not the carried packages' archives)
    path = os.path.realpath(os.path.join(build, a))
    return (a.endswith((".o", ".a")) and path.startswith(os.path.realpath(build) + os.sep) and
            not path.startswith(os.path.realpath(prefix) + os.sep))
for argv in links:
    program = os.path.basename(argv[argv.index("-o") + 1])
    out, skip = [argv[0], "-Wl,--no-as-needed"], False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a == "-o":
            out += ["-o", os.path.join(scan, program + ".probe"), probe]
            skip = True
        elif not built_here(a):
            out.append(a.replace("-Wl,--as-needed", "-Wl,--no-as-needed"))
    r = subprocess.run(out, cwd=build, capture_output=True, text=True)
    if r.returncode:
        failed += 1
        print(f"linking {program} fails:\n" + "\n".join(r.stderr.splitlines()[:8]))
print(f"scan: {len(compiles)} compile commands scanned, {len(headers)} headers; {len(links)} programs linked")
sys.exit(1 if failed else 0)
PY
}

# Headers the scan read from /usr/include, by Debian package: only the toolchain's may be there (the
# GPU machine has a compiler but no library -dev packages).
check_system_headers() {
  local build=$1
  local headers
  headers=$(grep '^/usr/include/' "$build/scan/headers.txt" | sort -u)
  [ -n "$headers" ] || return 0
  local owners
  owners=$(echo "$headers" | xargs -r dpkg -S 2>/dev/null | cut -d: -f1 | tr ',' '\n' | tr -d ' ' | sort -u)
  local bad
  bad=$(echo "$owners" | grep -Ev '^(libc6-dev|linux-libc-dev|libcrypt-dev|libstdc\+\+-[0-9]+-dev|libgcc-[0-9]+-dev)$')
  if [ -n "$bad" ]; then
    echo "headers came from system packages the GPU machine lacks (add them to scripts/debian-packages.txt):"
    local p
    for p in $bad; do echo "  $p: $(echo "$headers" | xargs -r dpkg -S 2>/dev/null | grep "^$p" | head -2 | cut -d' ' -f2 | tr '\n' ' ')"; done
    return 1
  fi
}

# Every library `ferry` loads must resolve inside the carried folder, the torch wheel's site-packages
# or the CUDA toolkit, except the C runtime every Linux has.
check_shared_libraries() {
  local binary=$1 prefix=$2 python=$3
  local site
  site=$("$python" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  # The toolkit's own libraries, wherever the nvcc used for the build keeps them (CI's lives in
  # /usr/local/bin with its libraries in /usr/local/lib; the GPU machine's in /usr/local/cuda).
  local cuda_root
  cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")
  local resolved
  resolved=$(LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu ldd "$binary") || return 1
  local bad
  bad=$(echo "$resolved" | awk '/=>/ {print $1, $3}' | while read -r name path; do
    case $path in
      "$prefix"/*|"$site"/*|/usr/local/cuda*) continue ;;
      "$cuda_root"/lib*) case $name in libcu*|libnv*) continue ;; esac ;;
    esac
    case $name in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libutil.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) ;;
      *) echo "  $name => $path" ;;
    esac
  done)
  if [ -n "$bad" ]; then
    echo "$(basename "$binary" .probe) loads libraries that are not carried (add their packages to scripts/debian-packages.txt):"
    echo "$bad"
    return 1
  fi
}

check_carry_size() {  # the working tree that travels plus .gpu-debs, against the device tool's limit
  local tree debs
  tree=$(git ls-files -co --exclude-standard -z | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  debs=$(du -sb "$debs_dir" | cut -f1)
  echo "carry: working tree $((tree / 1024)) KiB + .gpu-debs $((debs / 1024)) KiB (limit $((carry_limit / 1048576)) MiB)"
  [ $((tree + debs)) -lt $carry_limit ] || { echo "carry: over the device tool's limit"; return 1; }
}

dry_run() {
  local python=${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}
  # A build folder beside build/ (the same depth below the checkout, so ccache's relative paths
  # match between CI's clones), with the unpacked packages inside it.
  local scratch=${FERRY_BUILD:-$root/build}-gpu-dry-run
  local start
  start=$(date +%s)
  local log=$scratch/gpu-dry-run.log
  prepare || return 1
  unpack "$scratch/deps" || return 1
  local fails="gpu-check --dry-run: the GPU build fails with only the carried packages (log: $log)"
  FERRY_GPU_ARCH="8.0;9.0+PTX" configure "$scratch" "$scratch/deps" "$python" "$log" || { echo "$fails"; return 1; }
  # shellcheck disable=SC2086
  { cmake --build "$scratch" --target ferry_kernels_cuda >> "$log" 2>&1 &&
    scan_and_link "$scratch" "$scratch/deps" "$python" ferry generate_bench $gpu_tests >> "$log" 2>&1; } ||
    { grep -E -m 20 'error|fail' "$log"; echo "$fails"; return 1; }
  tail -1 "$log"
  # Where the GPU build finds Apache Arrow (pyarrow's libraries; CMakeLists.txt: ferry::arrow).
  echo "pyarrow: $(grep -o 'Ferry: Arrow .*' "$log" | head -1) ($(ls "$debs_dir"/pyarrow-*.tar.xz 2>/dev/null |
    xargs -r du -h | cut -f1) carried: the GPU machine's Python needs no pyarrow)"
  check_system_headers "$scratch" || return 1
  local program
  for program in "$scratch"/scan/*.probe; do
    check_shared_libraries "$program" "$scratch/deps" "$python" || return 1
    LD_LIBRARY_PATH=$scratch/deps/usr/lib/x86_64-linux-gnu "$program" ||
      { echo "$program (linked like $(basename "$program" .probe)) does not start"; return 1; }
  done
  check_carry_size || return 1
  echo "gpu-check --dry-run: ok in $(( $(date +%s) - start )) s ($(debian_packages carry | wc -l) carried packages)"
}

# The GPU tests: the GPU run builds and runs them; the dry run scans and links them.
gpu_tests=$(ls tests/gpu/*_test.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')

case "${1:-}" in
  --prepare) prepare && ls -la "$debs_dir"; exit ;;
  --dry-run) dry_run; exit ;;
  "") ;;
  *) echo "usage: scripts/gpu-check.sh [--prepare | --dry-run]" >&2; exit 2 ;;
esac

# --- The run on the GPU machine ---------------------------------------------------------------
out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
python=${FERRY_GPU_PYTHON:-python3}
export CCACHE_DISABLE=1
rc=0

# part NAME LIMIT_S COMMAND...: runs a part with its output in $out/NAME.log, under `timeout`, and
# writes its outcome to summary.txt at once.
part() {
  local name=$1 limit=$2
  shift 2
  local start status
  start=$(date +%s)
  # A part may be a shell function: exported, a child bash runs it under timeout.
  timeout --kill-after=10 "$limit" bash -c '"$@"' part "$@" > "$out/$name.log" 2>&1
  status=$?
  local seconds=$(( $(date +%s) - start ))
  case $status in
    0) note "part $name: ok in $seconds s (limit $limit s)" ;;
    124|137) note "part $name: TIMEOUT after $seconds s (limit $limit s)"; rc=1 ;;
    *) note "part $name: FAILED (exit $status) in $seconds s (limit $limit s)"; tail -15 "$out/$name.log" >> "$summary"; rc=1 ;;
  esac
  return $status
}

{
  echo "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "cores: $(nproc); $(nvcc --version 2>&1 | tail -1)"
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())'
} 2>&1 | tee -a "$summary"

prefix=$root/.gpu-deps
if [ -d "$debs_dir" ]; then
  unpack "$prefix" || { note "unpack .gpu-debs: FAILED"; exit 1; }
else
  note "no .gpu-debs folder: run scripts/gpu-check.sh --prepare here and carry .gpu-debs"; exit 1
fi
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ferry=build-gpu/ferry

export root ferry python debs_dir
export -f configure configure_and_build

# 1. configure + build: the executable and the GPU tests, all cores, no ccache (CMake's own output
#    in cmake.log; build.log has what failed).
# shellcheck disable=SC2086
part build 270 configure_and_build build-gpu "$prefix" "$python" "$out/cmake.log" ferry generate_bench $gpu_tests || exit 1
"$ferry" version | tee -a "$summary"
grep -o 'Ferry: Arrow .*' "$out/cmake.log" | head -1 | tee -a "$summary"

# 2. CUDA unit tests: kernels, ops and generation against their CPU references.
# The skip guard on each: a `[needs gpu]` skip on this machine is a failure, not a pass.
part cuda-tests 40 bash -c "cd build-gpu && ctest -L gpu -E train_offload --output-on-failure -j 4 --output-junit cuda.xml &&
  '$python' ../scripts/skip_guard.py cuda.xml --build ."
grep -E 'tests passed|tests failed|\(Failed\)|\*\*\*' "$out/cuda-tests.log" | head -20 >> "$summary"

# 3. Offload policies on the GPU against the CPU (same losses; allocator peaks under the budget).
part offload 40 bash -c "cd build-gpu && ctest -R train_offload --output-on-failure --output-junit offload.xml &&
  '$python' ../scripts/skip_guard.py offload.xml --build ."
grep -E 'tests passed|tests failed|\(Failed\)|peak' "$out/offload.log" | head -20 >> "$summary"

# 4. The stages, short, bf16 on the GPU (a 60-step demo SFT model first, then the rest from it).
stages() {
  local runs=$1
  local short="--set train.device=cuda --set train.precision=bf16 --set logging.progress=never --set logging.tensorboard=false"
  # shellcheck disable=SC2086
  "$ferry" train-sft --config configs/demo-sft.yaml --set output.dir=$runs/sft --set train.max_steps=60 \
    --set train.eval_every=0 --set train.save_every=0 $short &&
  "$ferry" train-sft --config configs/demo-sft.yaml --set output.dir=$runs/sft-int8 --set train.max_steps=20 \
    --set train.eval_every=0 --set train.save_every=0 $short --set offload.policy=optimizer \
    --set offload.optimizer_state=int8 &&
  "$ferry" train-sft --config configs/demo-sft-qlora.yaml --set model.path=$runs/sft/final \
    --set output.dir=$runs/qlora --set train.max_steps=20 --set train.eval_every=10 --set train.save_every=0 $short &&
  "$ferry" train-sft --config configs/demo-sft-qlora.yaml --set model.path=$runs/sft/final \
    --set output.dir=$runs/qlora-params --set train.max_steps=10 --set train.eval_every=10 --set train.save_every=0 \
    $short --set offload.policy=params &&
  "$ferry" train-rm --config configs/demo-rm.yaml --set model.path=$runs/sft/final --set output.dir=$runs/rm \
    --set train.max_steps=40 --set train.eval_every=20 $short --set offload.policy=optimizer &&
  "$ferry" score --model $runs/rm/final --data data/preference_eval.jsonl --limit 50 &&
  "$ferry" train-dpo --config configs/demo-dpo.yaml --set model.path=$runs/sft/final --set output.dir=$runs/dpo \
    --set train.max_steps=20 --set train.eval_every=10 $short --set offload.policy=params &&
  "$ferry" train-ppo --config configs/demo-ppo.yaml --set model.path=$runs/sft/final --set output.dir=$runs/ppo \
    --set ppo.reward_model=$runs/rm/final --set train.max_steps=10 $short &&
  "$ferry" train-ppo --config configs/demo-ppo.yaml --set model.path=$runs/sft/final --set output.dir=$runs/ppo-params \
    --set ppo.reward_model=$runs/rm/final --set train.max_steps=5 $short --set offload.policy=params \
    --set offload.gpu_memory=16MiB &&
  "$ferry" train-grpo --config configs/demo-grpo.yaml --set model.path=$runs/sft/final --set output.dir=$runs/grpo \
    --set train.max_steps=10 $short &&
  "$ferry" launch --nproc 2 -- train-ppo --config configs/demo-ppo.yaml --set model.path=$runs/sft/final \
    --set output.dir=$runs/ppo-2proc --set ppo.reward_model=$runs/rm/final --set train.max_steps=5 $short \
    --set distributed.zero_stage=2
}
export -f stages
runs=$(mktemp -d)
part stages 120 stages "$runs"
grep -E 'eval step|engine peak|CUDA allocator|preference accuracy|train-(ppo|grpo): (before|after)|error' \
  "$out/stages.log" | head -40 >> "$summary"

# 5. Data parallelism: 2 processes (NCCL with 2 GPUs, else Gloo on one), ZeRO 2 and 3 against 1
#    process with the same global batch, fp32.
data_parallel() {
  local runs=$1
  local args="--config configs/demo-sft.yaml --set train.max_steps=20 --set train.eval_every=0 --set train.save_every=0
    --set train.device=cuda --set logging.progress=never --set logging.tensorboard=false --set train.micro_batch_size=16"
  # shellcheck disable=SC2086
  "$ferry" train-sft $args --set output.dir=$runs/one --set train.grad_accumulation=2 &&
  "$ferry" launch --nproc 2 -- train-sft $args --set output.dir=$runs/zero2 --set distributed.zero_stage=2 &&
  "$ferry" launch --nproc 2 -- train-sft $args --set output.dir=$runs/zero3 --set distributed.zero_stage=3 \
    --set offload.policy=params &&
  "$python" - "$runs" <<'PY'
import json, sys
runs = sys.argv[1]
def rows(run):
    return [json.loads(l) for l in open(f"{runs}/{run}/metrics.jsonl") if '"grad_norm"' in l]
def rate(r):
    return sum(x["tokens_per_s"] for x in r[5:]) / max(len(r[5:]), 1)
one = rows("one")
for run in ("zero2", "zero3"):
    r = rows(run)
    worst = max(abs(a["loss"] - b["loss"]) / a["loss"] for a, b in zip(one, r))
    print(f"dp {run}: {len(r)} steps, worst relative loss difference vs 1 process {worst:.2e}, "
          f"{rate(r):.0f} tokens/s (1 process: {rate(one):.0f})")
PY
}
export -f data_parallel
part data-parallel 45 data_parallel "$runs"
grep -E '^dp ' "$out/data-parallel.log" >> "$summary"
rm -rf "$runs"

# 6. Decoding with and without CUDA graphs, and transformers' generate on the GPU when installed.
decode_bench() {
  FERRY_BUILD=$root/build-gpu FERRY_PYTHON=$python FERRY_BENCH_DTYPES=bf16 FERRY_BENCH_NEW_TOKENS=64 \
    bash scripts/bench-decode-gpu.sh
}
export -f decode_bench
part decode-bench 40 decode_bench
grep -E '^decode ' "$out/decode-bench.log" >> "$summary"

# 7. The other GPU benchmarks (each prints its figures as it goes, so a timeout keeps the finished lines).
benches() {
  local bench
  for bench in scripts/bench-*-gpu.sh; do
    [ -e "$bench" ] || continue
    [ "$bench" = scripts/bench-decode-gpu.sh ] && continue
    echo "-- $bench"
    FERRY_BUILD=$root/build-gpu FERRY_PYTHON=$python FERRY_BENCH_STEPS=3 bash "$bench"
  done
}
export -f benches
part bench 40 benches
grep -vE '^\s*$' "$out/bench.log" | grep -E ': |^--' | head -30 >> "$summary"
exit $rc
