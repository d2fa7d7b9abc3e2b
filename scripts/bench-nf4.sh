#!/usr/bin/env bash
# NF4 CPU kernels (kernels/cpu/nf4.h) against bitsandbytes and against the memory bus, in one run:
# Ferry's dequantise (to bf16 and fp32) and quantise (from bf16) of real weight shapes on 1..N
# threads (tests/bench/kernels_nf4_bench), bitsandbytes.functional.dequantize_4bit / quantize_4bit on
# the CPU for the same shapes and thread counts (OMP_NUM_THREADS and torch.set_num_threads, in
# Python), and the copy bandwidth (bytes read + written per second of a 256 MiB memcpy): a dequantise
# moves n/2 + 4n/64 + n * out_bytes bytes, so that over the bandwidth bounds any implementation.
# Prints every figure, then a summary with G elements/s, GB/s, Ferry / bnb and Ferry / bound.
# Each figure is the best of a few runs (other work on the machine only slows a run down). ~1 min.
#
#   scripts/bench-nf4.sh
# Environment: FERRY_BUILD (build dir, default build; kernels_nf4_bench is built there),
# FERRY_BENCH_BIN (a prebuilt kernels_nf4_bench instead), FERRY_BENCH_THREADS (default 1,<nproc>),
# FERRY_BENCH_SHAPES (default 4096x4096,4096x11008), FERRY_PYTHON.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${FERRY_BUILD:-build}"
threads="${FERRY_BENCH_THREADS:-1,$(nproc)}"
shapes="${FERRY_BENCH_SHAPES:-4096x4096,4096x11008}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
bench="${FERRY_BENCH_BIN:-}"
if [[ -z "$bench" ]]; then
  cd "$here"
  cmake --build "$build" --target kernels_nf4_bench
  bench="$build/tests/bench/kernels_nf4_bench"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
threads=$(echo "$threads" | tr ',' '\n' | awk '!seen[$0]++' | paste -sd,)

echo "== C++: Ferry NF4, copy bandwidth (threads $threads)"
"$bench" --threads "$threads" --shapes "$shapes" | tee "$work/cpp.txt"

echo "== Python: bitsandbytes dequantize_4bit / quantize_4bit on the CPU"
for t in ${threads//,/ }; do
  OMP_NUM_THREADS=$t "$python" - "$t" "$shapes" <<'PY' 2>&1 | grep -v -E "^W[0-9]{4} |torch._dynamo" | tee -a "$work/py.txt"
import sys, time
import torch
import bitsandbytes
import bitsandbytes.functional as F

threads, shapes = int(sys.argv[1]), sys.argv[2].split(",")
torch.set_num_threads(threads)
print(f"bitsandbytes {bitsandbytes.__version__}, torch {torch.__version__}, {threads} threads")

def best(fn, reps):
    fn()
    t = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - start)
    return t

for shape in shapes:
    rows, cols = map(int, shape.split("x"))
    w = (torch.randn(rows, cols) * 0.02).to(torch.bfloat16)
    seconds = best(lambda: F.quantize_4bit(w, quant_type="nf4", blocksize=64, compress_statistics=False), 2)
    print(f"RESULT bnb_quantize_bf16 {shape} {threads} {seconds:.9g}")
    print(f"  bnb quantise bf16 {shape}: {w.numel() / seconds / 1e9:.3f} G elements/s", flush=True)
    packed, state = F.quantize_4bit(w, quant_type="nf4", blocksize=64, compress_statistics=False)
    for name, dtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
        state.dtype = dtype
        seconds = best(lambda: F.dequantize_4bit(packed, state, quant_type="nf4"), 5)
        print(f"RESULT bnb_dequantize_{name} {shape} {threads} {seconds:.9g}")
        print(f"  bnb dequantise {name} {shape}: {w.numel() / seconds / 1e9:.3f} G elements/s", flush=True)
PY
done

echo "== Summary (G elements/s; GB/s moved = packed + absmax + output bytes; bound = copy GB/s)"
"$python" - "$work/cpp.txt" "$work/py.txt" <<'PY'
import sys
results = {}
for path in sys.argv[1:]:
    for line in open(path):
        if line.startswith("RESULT "):
            _, what, shape, threads, seconds = line.split()
            results[(what, shape, int(threads))] = float(seconds)
copy_bytes = 2 * (256 << 20)
threads = sorted({t for (_, _, t) in results})
shapes = sorted({s for (w, s, _) in results if s != "-"}, key=lambda s: eval(s.replace("x", "*")))
for t in threads:
    copy_gbs = copy_bytes / results[("copy", "-", t)] / 1e9
    print(f"-- {t} thread(s): copy {copy_gbs:.1f} GB/s")
    print(f"{'shape':>11} {'op':>14} {'Ferry':>8} {'bnb':>8} {'Ferry/bnb':>10} {'Ferry GB/s':>11} {'/bound':>7}")
    for shape in shapes:
        r, c = map(int, shape.split("x"))
        n = r * c
        for op, out_bytes in (("dequantize_bf16", 2), ("dequantize_f32", 4), ("quantize_bf16", None)):
            ferry = results.get((op, shape, t))
            bnb = results.get(("bnb_" + op, shape, t))
            if ferry is None:
                continue
            line = f"{shape:>11} {op:>14} {n / ferry / 1e9:8.3f} "
            line += f"{n / bnb / 1e9:8.3f} {bnb / ferry:9.2f}x" if bnb else f"{'-':>8} {'-':>10}"
            if out_bytes:
                moved = n / 2 + 4 * n / 64 + n * out_bytes
                line += f" {moved / ferry / 1e9:11.1f} {100 * moved / ferry / 1e9 / copy_gbs:6.0f}%"
            print(line)
PY
