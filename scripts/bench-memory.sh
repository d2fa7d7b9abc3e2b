#!/usr/bin/env bash
# What one SFT step holds on the (emulated) device, activations included, with the LM head's
# logits all at once and chunked (train.logits_chunk 0 and -1), for tiny-depth Llama models with a
# 32k (Llama-2) and a 152k (Qwen2.5) vocabulary at 4 x 1024 tokens, and for the same model with a
# 256-token vocabulary (the activations that are not logits). Prints each step's device peak and
# activation peak as the activation meter measures them, the memory model's activation estimate
# next to it, and the ratios: the logits' share of the activations (activations minus the small
# vocabulary's) with and without chunking. Then a 16-layer model (32k vocabulary, chunked head)
# with every layer checkpointed, its layer inputs kept on the device or offloaded to the host
# (train.activation_offload): how many layer inputs (4 x 1024 x 256 fp32 = 4 MiB each) the device
# holds at its peak. Those run under offload.policy optimizer, whose gradients leave the device as
# backward makes them (under `none` every layer's gradients, 3 MiB here, pile up on the device
# during backward as the inputs are freed, and are the peak). CPU, one step each; the 152k all-at-once step holds ~10 GB. Takes a few
# minutes.
#
#   scripts/bench-memory.sh [BUILD_DIR] [THREADS]
# BUILD_DIR (default build) must contain tests/bench/sft_bench (cmake --build BUILD_DIR --target sft_bench).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh" sft_bench 2 "$@"  # here, build, threads, python, bench, work

# Models (2 layers, hidden 256) and one batch of 4 x 1024 tokens per vocabulary, every token labelled.
"$python" - "$work" <<'PY'
import sys
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

work = sys.argv[1]
torch.manual_seed(0)
for vocab in (256, 32000, 151936):
    config = LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
                         tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(f"{work}/model_{vocab}")
    ids = torch.randint(0, vocab, (4, 1024))
    save_file({"input_ids": ids, "attention_mask": torch.ones_like(ids),
               "position_ids": torch.arange(1024).expand(4, 1024).contiguous(), "labels": ids.clone()},
              f"{work}/batch_{vocab}.safetensors")
deep = LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=16,
                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024, tie_word_embeddings=False)
LlamaForCausalLM(deep).save_pretrained(f"{work}/model_deep")
PY

for vocab in 256 32000 151936; do
  for chunk in 0 -1; do
    echo "== vocabulary $vocab, logits_chunk $chunk"
    "$bench" --model "$work/model_$vocab" --batch "$work/batch_$vocab.safetensors" --threads "$threads" --steps 1 \
      --logits-chunk "$chunk" | tee "$work/run_${vocab}_${chunk}.txt"
  done
done

for offload in 0 1; do
  echo "== 16 layers, checkpointed, activation_offload $offload"
  "$bench" --model "$work/model_deep" --batch "$work/batch_32000.safetensors" --threads "$threads" --steps 1 \
    --logits-chunk -1 --checkpointing 1 --activation-offload "$offload" --policy optimizer | tee "$work/deep_$offload.txt"
done

"$python" - "$work" <<'PY'
import sys
work = sys.argv[1]
def figure(vocab, chunk, key):
    for line in open(f"{work}/run_{vocab}_{chunk}.txt"):
        if line.startswith(key + "="):
            return float(line.split("=", 1)[1])
mib = lambda b: f"{b / 2**20:,.0f} MiB"
print("\nvocabulary  logits_chunk  device peak   activations   memory model (activations)  measured/model")
for vocab in (256, 32000, 151936):
    for chunk in (0, -1):
        act, est = figure(vocab, chunk, "activation_peak_bytes"), figure(vocab, chunk, "estimated_activation_bytes")
        print(f"{vocab:>10}  {chunk:>12}  {mib(figure(vocab, chunk, 'device_peak_bytes')):>11}  {mib(act):>12}"
              f"  {mib(est):>26}  {act / est:>14.2f}")
for vocab in (32000, 151936):
    share = {c: figure(vocab, c, "activation_peak_bytes") - figure(256, c, "activation_peak_bytes") for c in (0, -1)}
    peak = {c: figure(vocab, c, "device_peak_bytes") for c in (0, -1)}
    speed = {c: figure(vocab, c, "ferry_tokens_per_s") for c in (0, -1)}
    print(f"vocabulary {vocab}: logits' share of the activations {mib(share[0])} -> {mib(share[-1])} "
          f"({share[0] / share[-1]:.1f}x smaller); device peak {mib(peak[0])} -> {mib(peak[-1])} "
          f"({peak[0] / peak[-1]:.1f}x smaller); tokens/s chunked / all at once {speed[-1] / speed[0]:.2f} "
          f"(one step each)")
layer_input = 4 * 1024 * 256 * 4
def deep(offload, key):
    for line in open(f"{work}/deep_{offload}.txt"):
        if line.startswith(key + "="):
            return float(line.split("=", 1)[1])
kept, offloaded = deep(0, "activation_peak_bytes"), deep(1, "activation_peak_bytes")
print(f"16 checkpointed layers: device activation peak {mib(kept)} with the layer inputs kept, {mib(offloaded)} "
      f"offloaded ({(kept - offloaded) / layer_input:.2f} of 16 layer inputs left the device, so it held "
      f"{16 - (kept - offloaded) / layer_input:.2f} at its peak); host {mib(deep(1, 'host_activation_peak_bytes'))}; "
      f"device peak {mib(deep(0, 'device_peak_bytes'))} -> {mib(deep(1, 'device_peak_bytes'))}; tokens/s offloaded / "
      f"kept {deep(1, 'ferry_tokens_per_s') / deep(0, 'ferry_tokens_per_s'):.2f} (one step each)")
PY
