#!/usr/bin/env bash
# CpuAdamW throughput against torch and against the memory bus, on the same CPU and thread count:
# Ferry's SIMD AdamW (fp32 grads; bf16 grads + bf16 weight output), torch::optim::AdamW (C++
# frontend), torch.optim.AdamW(fused=True) and (foreach=True) from Python, for 50M/100M/200M
# parameters, a STREAM-style triad whose bandwidth / 28 bytes bounds any fp32 AdamW, and the
# same-traffic stream (AdamW's loads and stores with no arithmetic), the tighter bound. Also the
# int8-moment AdamW (kernels/cpu/adamw_int8.h, ~16 B/param), timed alternately with Ferry fp32, and
# its own same-traffic stream; the summary prints int8 / fp32 and int8 / int8 stream.
# Prints every figure, then the ratios. Each figure is the best of a few runs: on a shared machine
# other work only slows a run down. Takes 1-3 minutes and ~6 GB of memory at 200M.
#
#   scripts/bench-adamw.sh
# Environment: FERRY_BUILD (build dir, default build; cpu_adamw_bench is built there),
# FERRY_BENCH_BIN (a prebuilt cpu_adamw_bench instead), FERRY_BENCH_THREADS (default: all cores),
# FERRY_BENCH_SIZES (millions of parameters, default 50,100,200), FERRY_PYTHON.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${FERRY_BUILD:-build}"
threads="${FERRY_BENCH_THREADS:-$(nproc)}"
sizes="${FERRY_BENCH_SIZES:-50,100,200}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
bench="${FERRY_BENCH_BIN:-}"
if [[ -z "$bench" ]]; then
  cd "$here"
  cmake --build "$build" --target cpu_adamw_bench
  bench="$build/tests/bench/cpu_adamw_bench"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== C++: Ferry, torch::optim::AdamW, triad ($threads threads)"
"$bench" --threads "$threads" --sizes "$sizes" | tee "$work/cpp.txt"

echo "== Python: torch.optim.AdamW fused / foreach ($threads threads)"
"$python" - "$threads" "$sizes" <<'PY' | tee "$work/py.txt"
import gc, sys, time
import torch

threads, sizes = int(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")]
torch.set_num_threads(threads)
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")

def best_step_seconds(opt, steps):
    opt.step()  # warm-up: creates exp_avg / exp_avg_sq
    best = float("inf")
    for _ in range(steps):
        t = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t)
    return best

for size in sizes:
    n = size * 1_000_000
    p = torch.nn.Parameter(torch.rand(n) * 2 - 1)
    p.grad = torch.rand(n) * 2 - 1
    for name, kwargs, steps in (("py_fused", dict(fused=True), 3), ("py_foreach", dict(foreach=True), 2)):
        opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=1e-2, **kwargs)
        seconds = best_step_seconds(opt, steps)
        print(f"RESULT {name} {size} {n / seconds:.6g}")
        print(f"  {name:28s} {size:4d}M params: {n / seconds / 1e6:8.1f} M params/s", flush=True)
        del opt
        gc.collect()
    del p
    gc.collect()
PY

echo "== Summary (M params/s; ratios are Ferry fp32 over the others)"
"$python" - "$work/cpp.txt" "$work/py.txt" <<'PY'
import sys
results = {}
for path in sys.argv[1:]:
    for line in open(path):
        if line.startswith("RESULT "):
            _, what, size, value = line.split()
            results[(what, int(size))] = float(value)
bound = results[("adamw_bound", 0)]
print(f"memory bandwidth (triad, 24 B/element): {results[('triad_bytes_per_s', 0)] / 1e9:.2f} GB/s"
      f" -> AdamW bound at 28 B/param: {bound / 1e6:.1f} M params/s")
traffic = results[("same_traffic", 0)]
print(f"same-traffic stream (AdamW's 4 loads + 3 stores, no math): {traffic / 1e6:.1f} M params/s"
      f" = {100 * traffic / bound:.0f}% of the triad bound")
sizes = sorted({size for (what, size) in results if what == "ferry_f32"})
cols = ["ferry_f32", "ferry_bf16grad_bf16out", "torch_cpp_adamw", "aten_fused_adamw", "py_fused", "py_foreach"]
print(f"{'size':>6} " + " ".join(f"{c:>22}" for c in cols) +
      f" {'/torch C++':>11} {'/aten fused':>12} {'/py fused':>10} {'/py foreach':>12} {'/triad':>7} {'/stream':>8}")
def get(what, size):
    return results.get((what, size), float("nan"))
for size in sizes:
    ferry = get("ferry_f32", size)
    print(f"{size:>5}M " + " ".join(f"{get(c, size) / 1e6:22.1f}" for c in cols) +
          f" {ferry / get('torch_cpp_adamw', size):10.1f}x {ferry / get('aten_fused_adamw', size):11.2f}x"
          f" {ferry / get('py_fused', size):9.2f}x"
          f" {ferry / get('py_foreach', size):11.2f}x {100 * ferry / bound:6.0f}% {100 * ferry / traffic:7.0f}%")
print("aten fused = torch.optim.AdamW(fused=True)'s kernel timed alternately with Ferry in one process")
print("targets: >= 20x torch C++, >= 3x Python fused, >= 80% of the triad bound")
print("/stream: Ferry over the same-traffic stream, the most any AdamW can do with this memory traffic")

int8_traffic = results.get(("int8_same_traffic", 0))
if int8_traffic is not None and any(what == "ferry_int8_f32" for (what, _) in results):
    print()
    print("== int8 moments (offload.optimizer_state: int8; M params/s)")
    print(f"int8 same-traffic stream (its loads and stores, ~16 B/param, no math): {int8_traffic / 1e6:.1f} M params/s"
          f" = {int8_traffic / traffic:.2f}x the fp32 same-traffic stream")
    print(f"{'size':>6} {'int8 f32':>10} {'int8 bf16':>10} {'/fp32':>7} {'/fp32 bf16':>11} {'/int8 stream':>13}")
    for size in sizes:
        int8, int8_bf16 = get("ferry_int8_f32", size), get("ferry_int8_bf16grad_bf16out", size)
        print(f"{size:>5}M {int8 / 1e6:10.1f} {int8_bf16 / 1e6:10.1f} {int8 / get('ferry_f32', size):6.2f}x"
              f" {int8_bf16 / get('ferry_bf16grad_bf16out', size):10.2f}x {100 * int8 / int8_traffic:12.0f}%")
    print("/fp32: int8 over Ferry fp32 (same grad and output types, timed alternately in one process); target >= 1.3x")
    print("/int8 stream: int8 over its same-traffic stream, the most any int8 update can do with its traffic")
PY
