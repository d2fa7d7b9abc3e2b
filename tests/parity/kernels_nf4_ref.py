#!/usr/bin/env python3
"""Reference for Ferry's NF4 kernels (kernels/cpu/nf4.h): bitsandbytes 0.50.2 on the CPU.

Usage: kernels_nf4_ref.py OUTDIR. Writes OUTDIR/inputs.safetensors, OUTDIR/expected.safetensors,
OUTDIR/cases.json and two bnb-saved 4-bit checkpoints. Takes ~1 minute (bnb's odd-width dequantise
goes through torch.compile).

cases.json: {"torch_threads": torch.get_num_threads(), "torch_lanes": 8 (torch's float sum runs its
8-lane kernel on AVX-512 CPUs too), "cases": [{"name", "shape", "dtype", "blocksize", "nested"}, ...]}. The first two
decide bnb's double-quantisation offset (torch's x.mean() summation order, see nf4_absmax_offset).

For each case <name> (e.g. "bf16.normal.96x200.bs64.nested"):
  inputs:   <name>.x          the tensor, in its dtype (fp32 / bf16 / fp16)
  expected: <name>.packed     uint8 (ceil(numel/2)): quantize_4bit(x, quant_type="nf4", blocksize,
                              compress_statistics=nested)[0], flattened
            <name>.absmax     fp32 (blocks): the plain absmax (from the non-nested call)
            <name>.qabsmax    uint8 (blocks), <name>.absmax2 fp32, <name>.offset fp32 (1): the
                              nested state (nested cases only: state.absmax, state.state2.absmax,
                              state.offset)
            <name>.dequant    dequantize_4bit(packed, state), in the case's dtype, flattened
Distributions: normal (randn), uniform (rand * 2 - 1), outliers (randn with 1% of values x 50),
and "special": zeros, an all-zero block followed by a partial block, exact code-book midpoints times
a block absmax (ties), subnormal and huge values; "divide" (f32 only): values where multiplying by the
rounded reciprocal of the absmax and dividing by it give different codes, in a full and a partial
block.
Code books: nf4_code (16) = get_4bit_type("nf4"), dynamic_code (256) = create_dynamic_map().

Checkpoints: ckpt_nested.safetensors / ckpt_plain.safetensors, the state_dict of a
bnb.nn.Linear4bit(200, 96, bias=True, quant_type="nf4", compress_statistics=True / False) whose
bf16 weight was quantised on the CPU, saved with safetensors (weight, weight.absmax,
weight.quant_map, [weight.nested_absmax, weight.nested_quant_map,]
weight.quant_state.bitsandbytes__nf4, bias). expected: ckpt_nested.dequant / ckpt_plain.dequant
(bf16, (96, 200)) = dequantize_4bit(weight, weight.quant_state) as bnb computes it.
"""
import json
import pathlib
import sys

import bitsandbytes as bnb
import bitsandbytes.functional as F
import torch
from safetensors.torch import save_file

SHAPES = [(64, 128), (96, 200), (33, 77), (1, 4097), (1, 1), (1, 63), (1, 65), (300, 301)]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def draw(kind, shape, g):
    if kind == "normal":
        return torch.randn(shape, generator=g)
    if kind == "uniform":
        return torch.rand(shape, generator=g) * 2 - 1
    if kind == "outliers":
        x = torch.randn(shape, generator=g)
        mask = torch.rand(shape, generator=g) < 0.01
        return torch.where(mask, x * 50, x)
    raise ValueError(kind)


def special(g):
    """Edge cases in one (1, 4500) row: zeros, ties, tiny and huge values."""
    code = F.get_4bit_type("nf4", device="cpu")
    mids = (code[:-1] + code[1:]) / 2
    parts = [torch.zeros(128)]                                   # two all-zero full blocks
    tie = torch.cat([mids * 3.0, torch.tensor([3.0])])           # exact midpoints of absmax 3
    parts.append(torch.cat([tie, -tie, tie.flip(0), torch.zeros(32)])[:64])
    parts.append(torch.randn(64, generator=g) * 1e-40)           # subnormal block
    parts.append(torch.randn(64, generator=g) * 1e30)            # huge block
    parts.append(torch.randn(4500 - 320 - 20, generator=g))
    parts.append(torch.zeros(20))                                # an all-zero partial block
    return torch.cat(parts).reshape(1, -1)


def discriminating(am):
    """fp32 values within 64 ulps of a midpoint * am whose code differs between x * (1 / am) and x / am."""
    code = F.get_4bit_type("nf4", device="cpu")
    mids = (code[:-1] + code[1:]) / 2
    am = torch.tensor(am, dtype=torch.float32)
    bits = (mids * am).view(torch.int32)
    xs = (bits[:, None] + torch.arange(-64, 65, dtype=torch.int32)[None, :]).reshape(-1).view(torch.float32)
    xs = torch.cat([xs, -xs])
    return xs[torch.bucketize(xs * (1 / am), mids) != torch.bucketize(xs / am, mids)]


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    g = torch.Generator().manual_seed(18)
    inputs, expected, cases = {}, {}, []
    expected["nf4_code"] = F.get_4bit_type("nf4", device="cpu").float().contiguous()
    expected["dynamic_code"] = F.create_dynamic_map().float().contiguous()

    def add(name, x, blocksize, nested):
        plain_packed, plain_state = F.quantize_4bit(x, quant_type="nf4", blocksize=blocksize, compress_statistics=False)
        packed, state = F.quantize_4bit(x, quant_type="nf4", blocksize=blocksize, compress_statistics=nested)
        assert torch.equal(plain_packed, packed)
        inputs[f"{name}.x"] = x.reshape(-1).clone()
        expected[f"{name}.packed"] = packed.reshape(-1).contiguous()
        expected[f"{name}.absmax"] = plain_state.absmax.contiguous()
        if nested:
            expected[f"{name}.qabsmax"] = state.absmax.contiguous()
            expected[f"{name}.absmax2"] = state.state2.absmax.contiguous()
            expected[f"{name}.offset"] = state.offset.reshape(1).float().contiguous()
        deq = F.dequantize_4bit(packed, state, quant_type="nf4")
        expected[f"{name}.dequant"] = deq.reshape(-1).contiguous()
        assert deq.dtype == x.dtype
        cases.append({"name": name, "shape": list(x.shape), "dtype": [k for k, v in DTYPES.items() if v == x.dtype][0],
                      "blocksize": blocksize, "nested": nested})

    for dname, dtype in DTYPES.items():
        for shape in SHAPES:
            for kind in ("normal", "uniform", "outliers"):
                for nested in (False, True):
                    x = draw(kind, shape, g).to(dtype)
                    shape_name = "x".join(map(str, shape))
                    add(f"{dname}.{kind}.{shape_name}.bs64.{'nested' if nested else 'plain'}", x, 64, nested)
        for blocksize in (32, 128, 256, 4096):
            x = draw("normal", (96, 200), g).to(dtype)
            add(f"{dname}.normal.96x200.bs{blocksize}.nested", x, blocksize, True)
        x = special(g)
        if dtype == torch.float16:
            x = x.clamp(-60000, 60000)
        add(f"{dname}.special.1x4500.bs64.nested", x.to(dtype), 64, True)
    # A full block whose quantised codes differ when divided by its absmax instead of multiplied by
    # the reciprocal (bnb multiplies), and a partial block where they differ the other way round (bnb
    # divides there): values a few ulps from midpoint * absmax, found by search.
    am = 1.3
    ties = discriminating(am)
    assert ties.numel() >= 3, ties
    block = torch.cat([torch.tensor([am]), ties])
    x = torch.cat([block, torch.zeros(64 - block.numel()), block, torch.zeros(40 - block.numel())])
    for nested in (False, True):
        add(f"f32.divide.1x104.bs64.{'nested' if nested else 'plain'}", x.reshape(1, -1), 64, nested)
    # Enough blocks (> 32768) that torch sums the absmax for the offset on several threads, drawn until
    # that sum differs from the one-thread sum (so the test sees whether Ferry follows the split).
    threads = torch.get_num_threads()
    depends = False
    for _ in range(20):
        # Block scales spread over decades, so the sum's rounding depends on its order.
        scales = torch.exp(torch.randn(2049, 16, 1, generator=g) * 3).expand(2049, 16, 64).reshape(2049, 1024)
        x = (torch.randn(2049, 1024, generator=g) * scales).to(torch.bfloat16)
        if threads == 1:
            break
        _, st = F.quantize_4bit(x, quant_type="nf4", blocksize=64)
        torch.set_num_threads(1)
        single = st.absmax.mean()
        torch.set_num_threads(threads)
        if not torch.equal(single, st.absmax.mean()):
            depends = True
            break
    add("bf16.scaled.2049x1024.bs64.nested", x, 64, True)

    for nested in (True, False):
        layer = bnb.nn.Linear4bit(200, 96, bias=True, compute_dtype=torch.bfloat16, quant_type="nf4",
                                  compress_statistics=nested)
        weight = (torch.randn(96, 200, generator=g) * 0.05).to(torch.bfloat16)
        layer.weight = bnb.nn.Params4bit(weight, requires_grad=False, quant_type="nf4", blocksize=64,
                                         compress_statistics=nested)._quantize("cpu")
        layer.bias = torch.nn.Parameter(torch.randn(96, generator=g).to(torch.bfloat16), requires_grad=False)
        state_dict = {k: v.contiguous() for k, v in layer.state_dict().items()}
        tag = "nested" if nested else "plain"
        save_file(state_dict, str(out / f"ckpt_{tag}.safetensors"))
        expected[f"ckpt_{tag}.dequant"] = F.dequantize_4bit(layer.weight.data, layer.weight.quant_state,
                                                            quant_type="nf4").contiguous()
        assert expected[f"ckpt_{tag}.dequant"].shape == (96, 200)

    save_file(inputs, str(out / "inputs.safetensors"))
    save_file(expected, str(out / "expected.safetensors"))
    lanes = 8  # torch's float sum kernel is 8 lanes wide on AVX2 and AVX-512 CPUs alike
    meta = {"torch_threads": torch.get_num_threads(), "torch_lanes": lanes, "offset_depends_on_threads": depends,
            "cases": cases}
    (out / "cases.json").write_text(json.dumps(meta, indent=1))
    print(f"kernels_nf4: {len(cases)} cases, torch threads {meta['torch_threads']}, lanes {lanes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
