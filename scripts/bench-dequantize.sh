#!/usr/bin/env bash
# ggml dequantisation to float32 (src/io/ggml_dequantize.h) against gguf-py's numpy reference, in one
# run: Ferry's dequantize_row over the rows of one weight shape per type on 1 and N threads
# (tests/bench/io_ggml_dequantize_bench, compiled here from its torch-free sources in seconds), and
# gguf.quants.dequantize (numpy, one thread) on the same shape. Figures are GB/s of output floats
# (4 bytes per element), each the best of a few runs; a copy of the output size is printed as the
# memory-bound yardstick. Prints the host CPU, every figure, then a summary with Ferry / numpy. ~1 min.
#
#   scripts/bench-dequantize.sh
# Environment: FERRY_BENCH_TYPES (default Q4_0,Q4_1,Q8_0,Q4_K,Q6_K), FERRY_BENCH_SHAPE (rows x
# elements per row, default 8192x4096), FERRY_BENCH_THREADS (default 1,<nproc>), FERRY_BENCH_BIN (a
# prebuilt io_ggml_dequantize_bench instead), CXX, FERRY_PYTHON.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
types="${FERRY_BENCH_TYPES:-Q4_0,Q4_1,Q8_0,Q4_K,Q6_K}"
shape="${FERRY_BENCH_SHAPE:-8192x4096}"
threads="${FERRY_BENCH_THREADS:-1,$(nproc)}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
threads=$(echo "$threads" | tr ',' '\n' | awk '!seen[$0]++' | paste -sd,)
bench="${FERRY_BENCH_BIN:-}"
if [[ -z "$bench" ]]; then
  # The same optimisation as the CMake Release build (-O3), no -march: what the library ships.
  "${CXX:-c++}" -std=c++20 -O3 -DNDEBUG -Wall -Wextra -Wno-unused-parameter -I"$here" \
    "$here/tests/bench/io_ggml_dequantize_bench.cpp" "$here/src/io/ggml_dequantize.cpp" \
    "$here/src/io/ggml_types.cpp" "$here/kernels/cpu/thread_pool.cpp" -pthread -o "$work/bench"
  bench="$work/bench"
fi

echo "== host: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; $("${CXX:-c++}" --version | head -1)"
echo "== C++: Ferry dequantize_row (threads $threads)"
"$bench" --types "$types" --threads "$threads" --shape "$shape" | tee "$work/cpp.txt"

echo "== Python: gguf.quants.dequantize (numpy, one thread)"
"$python" - "$types" "$shape" <<'PY' | tee "$work/py.txt"
import sys, time
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, quants
from gguf.constants import GGML_QUANT_SIZES

types, shape = sys.argv[1].split(","), sys.argv[2]
rows, cols = map(int, shape.split("x"))
print(f"gguf-py {getattr(gguf, '__version__', '?')} ({gguf.__file__}), numpy {np.__version__}")
HALF_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q2_K": [80, 82],
               "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}
rng = np.random.default_rng(1234)
for name in types:
    block_elements, block_bytes = GGML_QUANT_SIZES[T[name]]
    data = rng.integers(0, 256, size=(rows, cols // block_elements * block_bytes), dtype=np.uint8)
    blocks = data.reshape(-1, block_bytes)
    for field in HALF_FIELDS.get(name, []):
        halves = rng.uniform(-0.05, 0.05, size=blocks.shape[0]).astype(np.float16)
        blocks[:, field:field + 2] = halves.view(np.uint8).reshape(-1, 2)
    quants.dequantize(data, T[name])  # warm-up
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        quants.dequantize(data, T[name])
        best = min(best, time.perf_counter() - start)
    print(f"RESULT numpy_{name} 1 {rows * cols} {best:.9g}")
    print(f"  numpy {name}: {4 * rows * cols / best / 1e9:.2f} GB/s of output floats", flush=True)
PY

echo "== Summary: GB/s of output floats (shape $shape); numpy runs on one thread"
"$python" - "$work/cpp.txt" "$work/py.txt" <<'PY'
import sys
results = {}
for path in sys.argv[1:]:
    for line in open(path):
        if line.startswith("RESULT "):
            _, what, threads, n, seconds = line.split()
            results[(what, int(threads))] = (int(n), float(seconds))
gbs = lambda r: 4 * r[0] / r[1] / 1e9
threads = sorted({t for (w, t) in results if w == "copy"})
types = [w for (w, t) in results if t == threads[0] and w != "copy" and not w.startswith("numpy_")]
print(f"{'type':>6} {'threads':>7} {'Ferry':>8} {'numpy':>8} {'Ferry/numpy':>12} {'copy':>8}")
for t in threads:
    for name in types:
        ferry, numpy = gbs(results[(name, t)]), gbs(results[("numpy_" + name, 1)])
        print(f"{name:>6} {t:>7} {ferry:8.2f} {numpy:8.2f} {ferry / numpy:11.1f}x {gbs(results[('copy', t)]):8.2f}")
PY
