#!/usr/bin/env python3
"""Reference for Ferry's ggml dequantisation (src/io/ggml_dequantize.h, ggml_dequantize_tensor.h):
gguf-py's `gguf.quants.dequantize` (numpy float32 arithmetic) for every type Ferry reads.

Usage: io_ggml_dequantize_ref.py OUTDIR. Writes inputs.safetensors with `blocks.<TYPE>.<case>`
(uint8, rows x bytes per row: the raw ggml blocks) and expected.safetensors with
`f32.<TYPE>.<case>` (gguf.quants.dequantize of those bytes, rows x elements) and `bf16.<...>` /
`f16.<...>` (torch's `.to(torch.bfloat16 / torch.float16)` of that float32). Cases per type:

  quant   types gguf-py can quantise (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0):
          gguf.quants.quantize of 7 rows x 2 blocks of float32 with outliers (+-1e4), exact zeros,
          negatives, tiny values (1e-30, 1e-40) and a row of zeros
  random  random block bytes (7 rows x 2 blocks) with every fp16 scale/min field overwritten by a
          finite random half (no NaN/Inf), so every bit of the quants is exercised; the types
          gguf-py cannot quantise (the K-quants) are tested through these
  zero    one all-zero-bytes block
  all     F16 and BF16 only: all 65536 bit patterns (NaN and Inf included)
"""
import pathlib
import sys

import numpy as np
import torch
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES
from safetensors.torch import save_file

TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
# Byte offsets of the fp16 d / dmin (or m) fields inside one block.
HALF_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}
ROWS, BLOCKS_PER_ROW = 7, 2


def can_quantize(qtype) -> bool:
    try:
        quants.quantize(np.zeros((1, GGML_QUANT_SIZES[qtype][0]), dtype=np.float32), qtype)
        return True
    except NotImplementedError:
        return False


def awkward_floats(rng, rows, cols):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[0, 3] = 1e4          # outliers of both signs
    x[1, 5] = -1e4
    x[2, :7] = 0.0         # exact zeros inside a block
    x[3, :] = -np.abs(x[3, :])  # a row of negatives
    x[4, 1] = 1e-30        # tiny values
    x[4, 2] = -1e-40       # fp32 subnormal
    x[5, :] *= 1e-3        # a row of small values
    x[6, :] = 0.0          # a row of zeros
    return x


def finite_halves(rng, n):
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    inf_nan = (h & 0x7C00) == 0x7C00
    h[inf_nan] &= np.uint16(0xBFFF)  # exponent 31 -> 15: a finite half
    return h


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20240611)
    inputs, expected = {}, {}
    summary = []
    for name in TYPES:
        qtype = T[name]
        block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
        cols = BLOCKS_PER_ROW * block_elements if block_elements > 1 else 64
        row_bytes = cols // block_elements * block_bytes
        cases = {}
        if can_quantize(qtype):
            q = quants.quantize(awkward_floats(rng, ROWS, cols), qtype)
            cases["quant"] = np.ascontiguousarray(q).view(np.uint8).reshape(ROWS, row_bytes)
        blocks = rng.integers(0, 256, size=(ROWS, row_bytes), dtype=np.uint8)
        if name in HALF_FIELDS:
            b = blocks.reshape(-1, block_bytes)
            for field in HALF_FIELDS[name]:
                b[:, field:field + 2] = finite_halves(rng, b.shape[0]).view(np.uint8).reshape(-1, 2)
        elif name == "F32":  # random finite floats of every magnitude
            f = blocks.view(np.uint32)
            f[(f & 0x7F800000) == 0x7F800000] &= np.uint32(0xBFFFFFFF)
        cases["random"] = blocks
        cases["zero"] = np.zeros((1, block_bytes if block_elements > 1 else 64 * block_bytes), dtype=np.uint8)
        if name in ("F16", "BF16"):
            cases["all"] = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.uint8).reshape(256, 512)
        for case, data in cases.items():
            data = np.ascontiguousarray(data)
            values = quants.dequantize(data, qtype)
            assert values.dtype == np.float32
            values = np.ascontiguousarray(values).reshape(data.shape[0], -1)
            key = f"{name}.{case}"
            inputs[f"blocks.{key}"] = torch.from_numpy(data.copy())
            f32 = torch.from_numpy(values.copy())
            expected[f"f32.{key}"] = f32
            expected[f"bf16.{key}"] = f32.to(torch.bfloat16)
            expected[f"f16.{key}"] = f32.to(torch.float16)
            summary.append(f"{key} {tuple(values.shape)}")
    save_file(inputs, str(out / "inputs.safetensors"))
    save_file(expected, str(out / "expected.safetensors"))
    print(f"io ggml dequantize: {len(summary)} cases: " + ", ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
