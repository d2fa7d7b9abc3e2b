#!/usr/bin/env python3
"""Reference for Ferry's ggml block quantisers (kernels/cpu/ggml_quantize.h): llama.cpp itself.

Usage: kernels_ggml_quantize_ref.py OUTDIR. Writes OUTDIR/inputs.safetensors,
OUTDIR/expected.safetensors and OUTDIR/cases.json.

The bytes come from ggml_quantize_chunk in the libggml-base.so that llama-cpp-python 0.3.36 ships
(the deps venv's llama_cpp/lib, built by scripts/deps.sh): the function llama-quantize calls for
every tensor, which without an importance matrix runs quantize_row_<type>_ref. For the 32-value
types gguf-py implements (Q4_0, Q5_0, Q5_1, Q8_0), gguf.quants.quantize's bytes are written too.

cases.json: {"types": {"Q4_K": [ggml type id, block values, block bytes], ...}, "cases": [names]}, or
{"skipped": why} when llama-cpp-python is not installed
  inputs:   <case>                    float32 (rows x 256, flattened); rows odd in some cases, so a
                                      Q4_K/Q5_K pass of two super-blocks ends on a lone one
  expected: llamacpp.<TYPE>.<case>    uint8: ggml_quantize_chunk(type, x, rows, 256)
            ggufpy.<TYPE>.<case>      uint8: gguf.quants.quantize(x.reshape(rows, 256), type)
Cases: normal (std 1 and 0.02, as trained weights), outliers (1% x 50), uniform, all positive and all
negative blocks (make_qkx2_quants clamps min to 0), zero and constant sub-blocks and blocks (max ==
min, all-zero super-blocks), a single non-zero value per block, small integers and a 1/16 grid
(ties in nearest_int and in the C's float -> int8 casts), 1e-30 and subnormal values (GROUP_MAX_EPS,
fp16 underflow), values near and beyond the fp16 range (1e4 to 1e6: fp16 overflow of the scale),
alternating signs, and rows of a real trained projection (SmolLM2-135M-Instruct's, dequantised from
the Q4_1 GGUF scripts/fetch-smollm2.sh caches, when it is at hand; else skipped, and said).
"""
import ctypes
import json
import pathlib
import sys

import numpy as np
from safetensors.numpy import save_file

import gguf
from gguf.quants import quantize

try:
    import llama_cpp
except ImportError:  # the test then skips, saying so ("[needs llama_cpp]")
    llama_cpp = None

TYPES = {  # name: (ggml type id, values per block, bytes per block)
    "Q4_0": (2, 32, 18), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34),
    "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
}
GGUFPY = {"Q4_0", "Q5_0", "Q5_1", "Q8_0"}


def ggml_library():
    lib = ctypes.CDLL(str(pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    return lib


def cases(rng):
    def normal(rows, std=1.0):
        return (rng.standard_normal(rows * 256) * std).astype(np.float32)

    out = {}
    out["normal"] = normal(33)
    out["weights"] = normal(64, 0.02)
    x = normal(31)
    x[rng.random(x.size) < 0.01] *= 50
    out["outliers"] = x
    out["uniform"] = rng.uniform(-1, 1, 256 * 17).astype(np.float32)
    out["positive"] = rng.uniform(0.1, 1, 256 * 9).astype(np.float32)
    out["negative"] = -rng.uniform(0.1, 1, 256 * 9).astype(np.float32)
    x = normal(13)
    x[:256] = 0                          # an all-zero super-block
    x[256:288] = 0                       # a zero sub-block
    x[512:544] = 1.5                     # a constant sub-block (max == min > 0)
    x[544:560] = -0.75                   # a constant Q6_K sub-block
    x[768:1024] = 0.25                   # a constant super-block
    x[1024:1056] = -0.0                  # negative zeros
    out["zeros_constants"] = x
    x = np.zeros(256 * 7, np.float32)
    x[rng.integers(0, 256, 7) + 256 * np.arange(7)] = rng.standard_normal(7).astype(np.float32)
    out["one_value"] = x
    out["integers"] = rng.integers(-8, 8, 256 * 11).astype(np.float32)
    out["grid"] = (np.round(rng.standard_normal(256 * 11) * 16) / 16).astype(np.float32)
    out["tiny"] = normal(5, 1e-30)
    out["subnormal"] = normal(5, 1e-40)
    x = normal(9, 1e4)
    x[::37] = rng.choice([6.5e4, -6.6e4, 2e5, 1e6], size=x[::37].size)
    out["huge"] = x
    x = np.abs(normal(5)) + 0.5
    x[1::2] *= -1
    out["alternating"] = x
    real = real_rows()
    if real is not None:
        out["smollm2_rows"] = real
    return out


def real_rows():
    """48 rows of SmolLM2-135M-Instruct's blk.0.ffn_down (1536 values a row), dequantised to float32 from
    the Q4_1 GGUF scripts/fetch-smollm2.sh caches, if it is there (every 32 values then sit on 16
    levels: many ties)."""
    path = pathlib.Path.home() / ".cache" / "ferry" / "models" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        print(f"kernels_ggml_quantize_ref: no {path}: the real-weights case is skipped")
        return None
    from gguf.quants import dequantize
    reader = gguf.GGUFReader(path)
    tensor = next(t for t in reader.tensors if t.name == "blk.0.ffn_down.weight")
    rows = dequantize(tensor.data, tensor.tensor_type).reshape(-1, int(tensor.shape[0]))
    return np.ascontiguousarray(rows[:48].astype(np.float32)).reshape(-1)


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    if llama_cpp is None:
        (out / "cases.json").write_text(json.dumps({"skipped": "llama-cpp-python is not in the deps venv"}))
        print("kernels_ggml_quantize_ref: llama_cpp is not installed: no fixtures")
        return 0
    lib = ggml_library()
    rng = np.random.default_rng(57)
    inputs, expected = {}, {}
    all_cases = cases(rng)
    for name, x in all_cases.items():
        assert x.dtype == np.float32 and x.size % 256 == 0, name
        inputs[name] = x
        for type_name, (type_id, values, nbytes) in TYPES.items():
            rows = x.size // 256
            dst = np.zeros(x.size // values * nbytes, np.uint8)
            written = lib.ggml_quantize_chunk(type_id, x.ctypes.data, dst.ctypes.data, 0, rows, 256, None)
            assert written == dst.size, (name, type_name, written, dst.size)
            expected[f"llamacpp.{type_name}.{name}"] = dst
            if type_name in GGUFPY:
                with np.errstate(all="ignore"):  # the huge case's scales overflow fp16, as in the C
                    q = quantize(x.reshape(rows, 256), gguf.GGMLQuantizationType[type_name])
                expected[f"ggufpy.{type_name}.{name}"] = np.ascontiguousarray(q.reshape(-1))
    save_file(inputs, str(out / "inputs.safetensors"))
    save_file(expected, str(out / "expected.safetensors"))
    (out / "cases.json").write_text(json.dumps({"types": TYPES, "cases": list(all_cases)}, indent=1))
    print(f"kernels_ggml_quantize_ref: {len(all_cases)} cases x {len(TYPES)} types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
