#!/usr/bin/env bash
# SFT training throughput, Ferry vs a plain transformers loop, on the same weights, batch and thread
# count, on the CPU: one optimizer step = forward, causal-LM loss, backward, clip_grad_norm_(1.0),
# AdamW. The model is configs/demo-model.json's shape (made with transformers); the batch is 16
# right-padded rows of 40-64 tokens with the last 5 tokens of each labelled. Ferry runs with all
# logits at once (the transformers way), then with the chunked LM head (train.logits_chunk -1, the
# default), then with activation checkpointing, and with activation checkpointing whose layer
# inputs wait in host memory (train.activation_offload). The ratios chunked / all-at-once and
# offloaded / checkpointed are those features' CPU cost (target: within 10%).
#
#   scripts/bench-sft.sh [BUILD_DIR] [THREADS]
# BUILD_DIR (default build) must contain tests/bench/sft_bench (cmake --build BUILD_DIR --target sft_bench).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh" sft_bench 2 "$@"  # here, build, threads, python, bench, work

"$python" - "$work" "$threads" "$here/configs/demo-model.json" <<'PY' | tee "$work/hf.txt"
import json, sys, time, statistics
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

work, threads, shape = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))
torch.set_num_threads(threads)
torch.manual_seed(0)
config = LlamaConfig(**{k: v for k, v in shape.items() if k not in ("architectures", "torch_dtype")})
model = LlamaForCausalLM(config)
model.save_pretrained(f"{work}/model")
rows, width = 16, 64
lengths = torch.randint(40, 65, (rows,))
ids = torch.full((rows, width), 3)
mask = torch.zeros(rows, width, dtype=torch.long)
labels = torch.full((rows, width), -100)
for r, n in enumerate(lengths.tolist()):
    ids[r, :n] = torch.randint(9, 2000, (n,))
    mask[r, :n] = 1
    labels[r, n - 5:n] = ids[r, n - 5:n]
positions = torch.arange(width).expand(rows, width).contiguous()
save_file({"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels},
          f"{work}/batch.safetensors")
model.train()
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4)
def step():
    opt.zero_grad(set_to_none=True)
    model(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
step()  # warm-up
times = []
for _ in range(10):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
median = statistics.median(times)
tokens = int(mask.sum())
print(f"transformers {__import__('transformers').__version__}: batch {rows} x {width}, threads {threads}: "
      f"median step {median:.4f} s, {tokens / median:.1f} tokens/s")
print(f"hf_tokens_per_s={tokens / median}")
PY
"$bench" --model "$work/model" --batch "$work/batch.safetensors" --threads "$threads" --logits-chunk 0 | tee "$work/ferry.txt"
"$bench" --model "$work/model" --batch "$work/batch.safetensors" --threads "$threads" --logits-chunk -1 | tee "$work/chunked.txt"
"$bench" --model "$work/model" --batch "$work/batch.safetensors" --threads "$threads" --logits-chunk -1 --checkpointing 1 | tee "$work/checkpointed.txt"
"$bench" --model "$work/model" --batch "$work/batch.safetensors" --threads "$threads" --logits-chunk -1 --checkpointing 1 \
  --activation-offload 1 | tee "$work/offloaded.txt"

"$python" - "$work" <<'PY'
import sys
work = sys.argv[1]
def figure(file, key):
    for line in open(file):
        if line.startswith(key + "="):
            return float(line.split("=", 1)[1])
hf, ferry = figure(f"{work}/hf.txt", "hf_tokens_per_s"), figure(f"{work}/ferry.txt", "ferry_tokens_per_s")
chunked = figure(f"{work}/chunked.txt", "ferry_tokens_per_s")
print(f"SFT tokens/s: ferry {ferry:.1f}, transformers {hf:.1f}, ratio ferry/transformers {ferry / hf:.2f}")
print(f"chunked LM head: {chunked:.1f} tokens/s, ratio chunked/all-logits {chunked / ferry:.2f}")
checkpointed = figure(f"{work}/checkpointed.txt", "ferry_tokens_per_s")
offloaded = figure(f"{work}/offloaded.txt", "ferry_tokens_per_s")
kept_bytes = figure(f"{work}/checkpointed.txt", "activation_peak_bytes")
offloaded_bytes = figure(f"{work}/offloaded.txt", "activation_peak_bytes")
print(f"activation offload: {offloaded:.1f} tokens/s against {checkpointed:.1f} checkpointed, ratio "
      f"offloaded/checkpointed {offloaded / checkpointed:.2f}; device activation peak {offloaded_bytes / 2**20:.2f} MiB "
      f"against {kept_bytes / 2**20:.2f} MiB")
PY
