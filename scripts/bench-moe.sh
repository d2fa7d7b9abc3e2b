#!/usr/bin/env bash
# Mixture-of-Experts training throughput on the CPU: forward + backward (no optimizer step) tokens/s
# of a Qwen3-MoE-shaped model at reduced depth and width (2 layers; 128 experts, 8 active per token,
# norm_topk_prob, the load-balancing loss on: output_router_logits), Ferry against transformers on
# the same weights, batch and thread count, in one run. transformers runs its experts two ways: the
# eager loop over experts (experts_implementation="eager", what the issue's target compares with)
# and its default (grouped_mm where torch dispatches it on the CPU, else eager); Ferry groups the
# tokens by expert, one GEMM per active expert. Prints tokens/s and the ratios (target: Ferry /
# eager >= 1.5).
#
#   scripts/bench-moe.sh [BUILD_DIR] [THREADS]
# BUILD_DIR (default build) must contain tests/bench/sft_bench (cmake --build BUILD_DIR --target sft_bench).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh" sft_bench 2 "$@"  # here, build, threads, python, bench, work

"$python" - "$work" "$threads" <<'PY' | tee "$work/hf.txt"
import sys, time, statistics
import torch
from safetensors.torch import save_file
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

work, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)
# Qwen3-30B-A3B's routing (128 experts, top-8, norm_topk_prob, 32 heads over 4 KV heads), at a
# quarter of its width and 2 of its 48 layers.
config = Qwen3MoeConfig(vocab_size=8192, hidden_size=512, intermediate_size=1536, moe_intermediate_size=192,
                        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                        num_experts=128, num_experts_per_tok=8, norm_topk_prob=True, output_router_logits=True,
                        router_aux_loss_coef=0.001, max_position_embeddings=2048, tie_word_embeddings=False)
model = Qwen3MoeForCausalLM(config)
model.save_pretrained(f"{work}/model")
rows, width = 8, 128
ids = torch.randint(9, config.vocab_size, (rows, width))
mask = torch.ones(rows, width, dtype=torch.long)
labels = ids.clone()
positions = torch.arange(width).expand(rows, width).contiguous()
save_file({"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels},
          f"{work}/batch.safetensors")
tokens = int(mask.sum())
for implementation in ("eager", None):
    model = Qwen3MoeForCausalLM.from_pretrained(f"{work}/model", **({"experts_implementation": implementation}
                                                                     if implementation else {}))
    model.train()
    used = model.config._experts_implementation
    def step():
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels).loss.backward()
    step()  # warm-up
    times = []
    for _ in range(5):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    key = "eager" if implementation == "eager" else "default"
    print(f"transformers {__import__('transformers').__version__} experts_implementation={used}: batch {rows} x {width}, "
          f"threads {threads}: median forward+backward {median:.4f} s, {tokens / median:.1f} tokens/s")
    print(f"hf_{key}_tokens_per_s={tokens / median}")
    print(f"hf_{key}_name={used}")
PY
"$bench" --model "$work/model" --batch "$work/batch.safetensors" --threads "$threads" --logits-chunk 0 --optimizer 0 \
  --steps 5 | tee "$work/ferry.txt"

"$python" - "$work" <<'PY'
import sys
work = sys.argv[1]
def figure(file, key, kind=float):
    for line in open(file):
        if line.startswith(key + "="):
            return kind(line.split("=", 1)[1].strip())
eager, default = figure(f"{work}/hf.txt", "hf_eager_tokens_per_s"), figure(f"{work}/hf.txt", "hf_default_tokens_per_s")
name = figure(f"{work}/hf.txt", "hf_default_name", str)
ferry = figure(f"{work}/ferry.txt", "ferry_tokens_per_s")
print(f"MoE forward+backward tokens/s: ferry {ferry:.1f}, transformers eager {eager:.1f}, transformers default "
      f"({name}) {default:.1f}; ratio ferry/eager {ferry / eager:.2f}, ferry/{name} {ferry / default:.2f}")
PY
