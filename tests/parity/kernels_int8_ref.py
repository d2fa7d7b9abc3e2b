#!/usr/bin/env python3
"""Reference for Ferry's row-wise int8 base (kernels/cpu/int8_rowwise.h, kernels/ops/int8.h):
bitsandbytes 0.50.2's LLM.int8 weight quantisation on the CPU.

Usage: kernels_int8_ref.py OUTDIR. Writes inputs.safetensors (w.<i>: the weights) and
expected.safetensors (cb.<i>, scb.<i>: `bitsandbytes.functional.int8_vectorwise_quant(w)`;
dequant.<i>.f32 / .bf16: `CB.to(dtype).mul_(SCB.unsqueeze(1).mul(1.0 / 127.0))`, what bnb's CPU
training matmul MatMul8bitFp multiplies with) for fp32, bf16 and fp16 weights of odd and even
sizes, normal and with outlier rows, one row all zeros, and a single column. Without bitsandbytes
(ImportError), writes OUTDIR/SKIPPED ("[needs bitsandbytes] ...") and exits 0: the C++ test then
skips, and scripts/skip_guard.py allows that only where the deps venv has no bitsandbytes. Any other
error while importing it fails this fixture (and so the test).
"""
import pathlib
import sys

import torch
from safetensors.torch import save_file


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "SKIPPED").unlink(missing_ok=True)
    try:
        import bitsandbytes.functional as F
    except ImportError as e:  # not installed (ModuleNotFoundError included); any other error fails
        (out / "SKIPPED").write_text(f"[needs bitsandbytes] bitsandbytes cannot be imported: {e}\n")
        print(f"kernels int8: skipped ({e})")
        return 0
    torch.manual_seed(31)
    cases = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for rows, cols in ((37, 101), (64, 333), (5, 7), (128, 96), (3, 1)):
            cases.append((torch.randn(rows, cols) * torch.rand(rows, 1) * 4).to(dtype))
        w = torch.randn(17, 45)
        w[3] *= 1000  # an outlier row
        w[5, 7] = 60.0  # an outlier element
        w[9] = 0  # a zero row
        cases.append(w.to(dtype))
    inputs, expected = {}, {}
    for i, w in enumerate(cases):
        cb, scb, _ = F.int8_vectorwise_quant(w.clone())
        inputs[f"w.{i}"] = w.contiguous()
        expected[f"cb.{i}"] = cb.contiguous()
        expected[f"scb.{i}"] = scb.contiguous()
        for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            expected[f"dequant.{i}.{name}"] = cb.to(dtype).mul_(scb.unsqueeze(1).mul(1.0 / 127.0)).contiguous()
    save_file(inputs, str(out / "inputs.safetensors"))
    save_file(expected, str(out / "expected.safetensors"))
    print(f"kernels int8: {len(cases)} weights quantised by bitsandbytes {__import__('bitsandbytes').__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
