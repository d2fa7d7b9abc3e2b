#!/usr/bin/env python3
"""llama.cpp's own quantiser against Ferry's llama-quantize types; run by
gguf_kquant_export_parity_test.cpp.

  gguf_kquant_export_check.py F32.gguf WORKDIR TYPE=FERRY.gguf [TYPE=FERRY.gguf ...]

F32.gguf is Ferry's f32 export of a model; each FERRY.gguf its export of the same model with
--gguf-type TYPE (q4_0, q5_0, q4_k_s, q4_k_m, q5_k_m, q6_k). For each TYPE:
  1. llama.cpp's llama_model_quantize (llama-cpp-python 0.3.36, default params: no imatrix, 2
     threads) quantises F32.gguf with LLAMA_FTYPE_MOSTLY_<TYPE> into WORKDIR/llama-<TYPE>.gguf;
  2. gguf-py reads both files: the same tensor names, and per tensor the same ggml type, shape and
     bytes; general.file_type the same;
  3. llama.cpp loads both files and, on a fixed 48-token input, gives the same logits for both (bytes
     equal, so exactly equal);
  4. the error of the quantised logits against F32.gguf's (llama.cpp on both): relative RMS error
     (rms(q - f32) / rms(f32 - its mean)) within BOUNDS[TYPE], and the share of positions whose
     argmax is unchanged, printed.
Prints a line per type and every difference; exit 1 if a check fails, 77 when llama_cpp is missing.
"""
import pathlib
import sys

import numpy as np

try:
    import llama_cpp
    from llama_cpp import Llama
except ImportError:
    print("llama_cpp is not installed")
    sys.exit(77)
from gguf import GGUFReader

FTYPES = {"q4_0": 2, "q5_0": 8, "q4_k_s": 14, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}
# Relative RMS error of the logits against f32 each type may show on these random tiny models.
# Measured 2026-12-07 (llama / qwen2 / phi3 / gemma3): q4_0 0.202 / 0.185 / 0.231 / 0.345, q5_0 0.119 /
# 0.097 / 0.114 / 0.178, q4_k_s 0.148 / 0.147 / 0.155 / 0.270, q4_k_m 0.156 / 0.170 / 0.192 / 0.283,
# q5_k_m 0.078 / 0.081 / 0.077 / 0.139, q6_k 0.044 / 0.052 / 0.049 / 0.086: 2-5 times each type's
# weight error (tests/unit/io_ggml_quantize_test.cpp), Gemma 3's six layers the most. Bounds: 1.3 x
# the largest.
BOUNDS = {"q4_0": 0.45, "q5_0": 0.24, "q4_k_s": 0.36, "q4_k_m": 0.37, "q5_k_m": 0.18, "q6_k": 0.11}
TOKENS = [1] + [int(t) for t in np.random.default_rng(5).integers(3, 512, 47)]

failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def quantize_with_llama_cpp(source, target, ftype):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), params)
    if status != 0:
        fail(f"llama_model_quantize({source}, ftype {ftype}) returned {status}")


def tensors(path):
    reader = GGUFReader(path)
    field = reader.get_field("general.file_type")
    file_type = int(field.contents()) if field is not None else None
    return file_type, {t.name: t for t in reader.tensors}


def logits(path):
    llm = Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False, n_threads=2, seed=0, type_k=0,
                type_v=0)
    llm.reset()
    llm.eval(TOKENS)
    out = np.array(llm.scores[: len(TOKENS)], dtype=np.float64)
    llm.close()
    return out


def compare_files(type_name, ferry_path, llama_path):
    ferry_ft, ferry = tensors(ferry_path)
    llama_ft, llama = tensors(llama_path)
    if ferry_ft != llama_ft:
        fail(f"{type_name}: general.file_type Ferry {ferry_ft}, llama.cpp {llama_ft}")
    if set(ferry) != set(llama):
        fail(f"{type_name}: tensor names differ: only Ferry {sorted(set(ferry) - set(llama))}, "
             f"only llama.cpp {sorted(set(llama) - set(ferry))}")
    counts, equal = {}, 0
    for name in sorted(set(ferry) & set(llama)):
        f, q = ferry[name], llama[name]
        if f.tensor_type != q.tensor_type or list(f.shape) != list(q.shape):
            fail(f"{type_name}: {name}: Ferry {f.tensor_type.name} {list(f.shape)}, llama.cpp "
                 f"{q.tensor_type.name} {list(q.shape)}")
            continue
        counts[f.tensor_type.name] = counts.get(f.tensor_type.name, 0) + 1
        a = np.asarray(f.data).view(np.uint8).reshape(-1)
        b = np.asarray(q.data).view(np.uint8).reshape(-1)
        if a.size != b.size or not np.array_equal(a, b):
            differing = int((a != b).sum()) if a.size == b.size else -1
            fail(f"{type_name}: {name} ({f.tensor_type.name}): {differing} of {b.size} bytes differ")
            continue
        equal += 1
    mix = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
    return f"{equal}/{len(llama)} tensors byte-equal ({mix})"


def main() -> int:
    f32_path, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    reference = logits(f32_path)
    spread = float(np.sqrt(np.mean((reference - reference.mean(axis=-1, keepdims=True)) ** 2)))
    for argument in sys.argv[3:]:
        type_name, ferry_path = argument.split("=", 1)
        llama_path = work / f"llama-{type_name}.gguf"
        quantize_with_llama_cpp(f32_path, llama_path, FTYPES[type_name])
        if not llama_path.is_file():
            continue
        files = compare_files(type_name, ferry_path, llama_path)
        ferry_logits, llama_logits = logits(ferry_path), logits(llama_path)
        same = float(np.abs(ferry_logits - llama_logits).max())
        if same != 0.0:
            fail(f"{type_name}: llama.cpp's logits on Ferry's file differ from those on its own by {same:.3e}")
        error = float(np.sqrt(np.mean((ferry_logits - reference) ** 2))) / spread
        top1 = float(np.mean(ferry_logits.argmax(-1) == reference.argmax(-1)))
        print(f"{type_name}: {files}; logits Ferry file = llama.cpp file (max diff {same:.1e}); vs f32: relative "
              f"RMS error {error:.4f} (bound {BOUNDS[type_name]}), max |diff| "
              f"{float(np.abs(ferry_logits - reference).max()):.4f} (logit spread {spread:.3f}), argmax kept "
              f"{top1:.0%}")
        if not error <= BOUNDS[type_name]:
            fail(f"{type_name}: relative RMS logit error {error:.4f} above {BOUNDS[type_name]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
