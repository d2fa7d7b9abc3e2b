#!/usr/bin/env bash
# Ferry's llama-quantize types against llama.cpp's quantiser (llama-cpp-python in the deps venv), in
# one run, on the same files:
#   1. the Q4_K quantiser: a SmolLM2-135M-sized llama (138M parameters: hidden 768, 14 layers, ffn
#      2048, vocab 32768, untied; random fp32, every matrix's rows a multiple of 256, so all of them
#      are Q4_K) exported by Ferry as an F32 GGUF; Ferry's ggml_quantize on its matrices on 1..N
#      threads (tests/bench/kernels_ggml_quantize_bench, which mmaps the file), its scalar
#      definition and each SIMD path (AVX2, AVX-512) on one thread; llama.cpp's ggml_quantize_chunk
#      (its Q4_K reference, one thread) on the same tensors, and llama_model_quantize of the file
#      (pure Q4_K, whole file: read, quantise, write) on 1..N threads. Figures in M values/s and MB/s of f32 input; ratios Ferry / llama.cpp.
#   2. q4_k_m end to end on that model: `ferry export --gguf-type q4_k_m` from the Hugging Face folder
#      against llama_model_quantize(F32 GGUF -> Q4_K_M) on N threads; the two files' tensors compared
#      byte for byte.
#   3. the real SmolLM2-135M-Instruct (the Q4_1 GGUF scripts/fetch-smollm2.sh caches, when present):
#      `ferry export --checkpoint FILE.gguf --gguf-type q4_k_m` against llama_model_quantize(FILE ->
#      Q4_K_M, allow_requantize) from the same file; tensors compared.
# Each figure is the best of a few runs (other work on the machine only slows a run down). ~3 min.
#
#   scripts/bench-quantize.sh
# Environment: FERRY_BUILD (build dir, default build: kernels_ggml_quantize_bench and ferry are built
# there), FERRY_BENCH_BIN and FERRY_BINARY (prebuilt programs instead), FERRY_BENCH_THREADS (default
# 1,<nproc>), FERRY_PYTHON.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${FERRY_BUILD:-build}"
threads="${FERRY_BENCH_THREADS:-1,$(nproc)}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
bench="${FERRY_BENCH_BIN:-}"
ferry="${FERRY_BINARY:-}"
if [[ -z "$bench" || -z "$ferry" ]]; then
  cd "$here"
  cmake --build "$build" --target kernels_ggml_quantize_bench ferry
  bench="${bench:-$build/tests/bench/kernels_ggml_quantize_bench}"
  ferry="${ferry:-$build/ferry}"
fi
bench="$(realpath "$bench")"
ferry="$(realpath "$ferry")"
threads=$(echo "$threads" | tr ',' '\n' | awk '!seen[$0]++' | paste -sd,)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

PYTHONDONTWRITEBYTECODE=1 "$python" - "$here" "$ferry" "$bench" "$work" "$threads" <<'PY'
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import torch
from gguf import GGUFReader
from transformers import LlamaConfig, LlamaForCausalLM

import llama_cpp

here, ferry, bench, work, threads = sys.argv[1], sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4]), sys.argv[5]
threads = [int(t) for t in threads.split(",")]
sys.path.insert(0, os.path.join(here, "tests", "parity"))
from gguf_kquant_export_ref import write_tokenizer  # noqa: E402

Q4_K, Q4_K_M = 12, 15
results = []  # (label, seconds, values)


def best(fn, reps=2):
    fn()
    t = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - start)
    return t


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def llama_quantize(source, target, ftype, nthread, pure=False, requantize=False):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread, params.pure, params.allow_requantize = ftype, nthread, pure, requantize
    # llama.cpp logs every tensor on stderr: into a file instead (printed if the call fails).
    log = work / "llama_quantize.log"
    saved, sink = os.dup(2), os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(sink, 2)
    try:
        status = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), params)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(sink)
    if status != 0:
        raise SystemExit(f"llama_model_quantize({source}) failed:\n" + log.read_text()[-3000:])


def compare(ferry_file, llama_file):
    a = {t.name: t for t in GGUFReader(ferry_file).tensors}
    b = {t.name: t for t in GGUFReader(llama_file).tensors}
    same = sum(1 for n in b if n in a and a[n].tensor_type == b[n].tensor_type
               and np.array_equal(np.asarray(a[n].data).view(np.uint8), np.asarray(b[n].data).view(np.uint8)))
    return f"{same}/{len(b)} tensors byte-equal" + ("" if set(a) == set(b) else " (tensor names differ)")


print(f"llama-cpp-python {llama_cpp.__version__}, {os.cpu_count()} CPUs; Ferry threads {threads}")
# --- the model ----------------------------------------------------------------------------------
torch.manual_seed(0)
config = LlamaConfig(vocab_size=32768, hidden_size=768, intermediate_size=2048, num_hidden_layers=14,
                     num_attention_heads=12, num_key_value_heads=4, tie_word_embeddings=False,
                     max_position_embeddings=2048)
model = LlamaForCausalLM(config)
params = sum(p.numel() for p in model.parameters())
model.save_pretrained(work / "model")
write_tokenizer(work / "model")
del model
f32 = work / "f32.gguf"
run(ferry, "export", "--checkpoint", str(work / "model"), "--format", "gguf", "--gguf-type", "f32", "--output", str(f32))
reader = GGUFReader(f32)
matrices = [t for t in reader.tensors if len(t.shape) == 2]
values = sum(int(t.n_elements) for t in matrices)
print(f"model: llama, {params / 1e6:.1f}M parameters, {len(matrices)} matrices, {values / 1e6:.1f}M values to quantise "
      f"({values * 4 / 1e6:.0f} MB f32)")

# --- 1. the Q4_K quantiser ----------------------------------------------------------------------
ranges = ",".join(f"{int(t.data_offset)}:{int(t.n_elements)}" for t in matrices)
out = subprocess.run([bench, "--file", str(f32), "--ranges", ranges, "--type", "q4_k", "--threads",
                      ",".join(map(str, threads)), "--reps", "3"], check=True, capture_output=True, text=True).stdout
print(out, end="")
names = {"ferry_definition": "definition (scalar)", "ferry_avx2": "AVX2 path", "ferry_avx512": "AVX-512 path",
         "ferry": "ggml_quantize"}
for kind, t, seconds, n in re.findall(r"RESULT (\S+) (\d+) (\S+) (\d+)", out):
    results.append((f"Ferry {names[kind]}, {t} thread(s)", float(seconds), int(n)))

lib = __import__("ctypes").CDLL(str(pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
import ctypes  # noqa: E402
lib.ggml_quantize_chunk.restype = ctypes.c_size_t
lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                    ctypes.c_int64, ctypes.c_void_p]
arrays = [np.ascontiguousarray(np.asarray(t.data, dtype=np.float32)) for t in matrices]
dst = np.zeros(max(a.size for a in arrays) // 256 * 144, np.uint8)


def chunk_all():
    for a in arrays:
        lib.ggml_quantize_chunk(Q4_K, a.ctypes.data, dst.ctypes.data, 0, a.shape[0], a.shape[1], None)


seconds = best(chunk_all, 1)
results.append(("llama.cpp ggml_quantize_chunk (Q4_K reference), 1 thread", seconds, values))
for t in threads:
    seconds = best(lambda: llama_quantize(f32, work / "llama-pure.gguf", Q4_K_M, t, pure=True))
    results.append((f"llama.cpp llama_model_quantize (file, pure Q4_K), {t} thread(s)", seconds, values))

print("\n== Q4_K on the same tensors (M values/s, MB/s of f32 input)")
base = {label: s for label, s, _ in results}
reference = next(s for label, s, _ in results if label.startswith("llama.cpp ggml_quantize_chunk"))
for label, seconds, n in results:
    print(f"  {label:64s} {seconds:7.3f} s  {n / seconds / 1e6:7.1f} M/s  {n * 4 / seconds / 1e6:7.1f} MB/s  "
          f"x{reference / seconds:5.2f} vs llama.cpp's Q4_K reference")
for t in threads:
    ferry_s = next(s for label, s, _ in results if label == f"Ferry ggml_quantize, {t} thread(s)")
    llama_s = next(s for label, s, _ in results if label.startswith("llama.cpp llama_model_quantize") and
                   label.endswith(f"{t} thread(s)"))
    print(f"  ratio at {t} thread(s): Ferry ggml_quantize / llama.cpp llama_model_quantize = {llama_s / ferry_s:.2f}x "
          "faster")

# --- 2. q4_k_m end to end -----------------------------------------------------------------------
n = threads[-1]
ferry_out = work / "ferry-q4_k_m.gguf"
ferry_s = best(lambda: run(ferry, "export", "--checkpoint", str(work / "model"), "--format", "gguf", "--gguf-type",
                           "q4_k_m", "--output", str(ferry_out)))
llama_s = best(lambda: llama_quantize(f32, work / "llama-q4_k_m.gguf", Q4_K_M, n))
print(f"\n== q4_k_m of the {params / 1e6:.0f}M-parameter model")
print(f"  ferry export (Hugging Face fp32 folder -> Q4_K_M GGUF, {os.cpu_count()} threads): {ferry_s:.2f} s")
print(f"  llama.cpp llama_model_quantize (F32 GGUF -> Q4_K_M, {n} threads):              {llama_s:.2f} s")
print(f"  ratio {llama_s / ferry_s:.2f}x; files: {compare(ferry_out, work / 'llama-q4_k_m.gguf')}")

# --- 3. the real SmolLM2-135M-Instruct ----------------------------------------------------------
smollm2 = pathlib.Path(os.environ.get("FERRY_DEPS", pathlib.Path.home() / ".cache" / "ferry")) / "models" / \
    "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
if smollm2.is_file():
    ferry_out = work / "smollm2-ferry-q4_k_m.gguf"
    ferry_s = best(lambda: run(ferry, "export", "--checkpoint", str(smollm2), "--format", "gguf", "--gguf-type",
                               "q4_k_m", "--output", str(ferry_out)))
    llama_s = best(lambda: llama_quantize(smollm2, work / "smollm2-llama-q4_k_m.gguf", Q4_K_M, n, requantize=True))
    print(f"\n== q4_k_m of SmolLM2-135M-Instruct from its Q4_1 GGUF (both requantise the same file)")
    print(f"  ferry export: {ferry_s:.2f} s; llama.cpp llama_model_quantize ({n} threads): {llama_s:.2f} s; "
          f"ratio {llama_s / ferry_s:.2f}x; files: {compare(ferry_out, work / 'smollm2-llama-q4_k_m.gguf')}")
else:
    print(f"\n(no {smollm2}: scripts/fetch-smollm2.sh fetches it; the real-model figure is skipped)")
PY
