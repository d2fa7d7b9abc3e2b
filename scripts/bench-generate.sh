#!/usr/bin/env bash
# Generation throughput, Ferry vs transformers, on the same weights, prompts and thread count:
# greedy decoding with a KV cache, batch 4, 128 new tokens, on the CPU.
#
#   scripts/bench-generate.sh [BUILD_DIR] [THREADS]
# BUILD_DIR (default build) must contain tests/bench/generate_bench (cmake --build BUILD_DIR
# --target generate_bench). The model (hidden 256, 4 layers, vocab 2000) is made with transformers.
# THREADS (default 1) is used by both sides. Keep it at or below the number of idle cores: on a
# busy machine, intra-op threads that wait for each other make both figures ten times worse.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh" generate_bench 1 "$@"  # here, build, threads, python, bench, work

"$python" - "$work" "$threads" <<'PY' | tee "$work/hf.txt"
import sys, time, statistics
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

work, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)
config = LlamaConfig(vocab_size=2000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                     num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
                     pad_token_id=0, bos_token_id=1, eos_token_id=2)
model = LlamaForCausalLM(config).eval()
model.save_pretrained(f"{work}/model")
ids = torch.randint(3, 2000, (4, 32))
mask = torch.ones_like(ids)
for row, pad in enumerate([0, 5, 9, 14]):  # left padding, as batched prompts have
    ids[row, :pad] = 0
    mask[row, :pad] = 0
save_file({"input_ids": ids, "attention_mask": mask}, f"{work}/prompts.safetensors")

def run():
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=128, min_new_tokens=128, do_sample=False,
                              pad_token_id=0, eos_token_id=None)
run()  # warm-up
times = []
for _ in range(3):
    start = time.perf_counter()
    out = run()
    times.append(time.perf_counter() - start)
median = statistics.median(times)
new = out.shape[1] - ids.shape[1]
save_file({"tokens": out.contiguous()}, f"{work}/hf_tokens.safetensors")
print(f"transformers {__import__('transformers').__version__}: batch 4, prompt 32, new tokens {new}, "
      f"threads {threads}: median {median:.3f} s, {4 * new / median:.1f} tokens/s")
print(f"hf_tokens_per_s={4 * new / median}")
PY
"$bench" --model "$work/model" --prompts "$work/prompts.safetensors" --threads "$threads" --new-tokens 128 \
         --tokens-out "$work/ferry_tokens.safetensors" | tee "$work/ferry.txt"

"$python" - "$work" <<'PY'
import sys
from safetensors.torch import load_file
work = sys.argv[1]
same = bool((load_file(f"{work}/hf_tokens.safetensors")["tokens"] == load_file(f"{work}/ferry_tokens.safetensors")["tokens"]).all())
print(f"same tokens as transformers: {same}")
def figure(file, key):
    for line in open(file):
        if line.startswith(key + "="):
            return float(line.split("=", 1)[1])
hf, ferry = figure(f"{work}/hf.txt", "hf_tokens_per_s"), figure(f"{work}/ferry.txt", "ferry_tokens_per_s")
print(f"tokens/s: ferry {ferry:.1f}, transformers {hf:.1f}, ratio ferry/transformers {ferry / hf:.2f}")
PY
