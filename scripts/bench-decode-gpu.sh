#!/usr/bin/env bash
# Decoding on a GPU with and without CUDA graphs (src/generate/fixed_decode_step.h: the decode step
# replayed as one graph per batch-size bucket) and against transformers' generate on the same GPU
# when the machine's Python has transformers: a random model of SmolLM2-135M's shape (30 layers,
# hidden 576, vocabulary 49 152), fp32 and bf16, batches of 16 and 64 rows (each prompt 4 times,
# prompts of 16-63 tokens), greedy, 128 new tokens. Ferry's tokens must be the same with graphs on
# and off. scripts/gpu-check.sh runs it; FERRY_BENCH_DEVICE=cpu checks the script here (the graphs
# are then off both times).
#
#   scripts/bench-decode-gpu.sh          (build dir: FERRY_BUILD, default build)
# Environment: FERRY_BENCH_DEVICE (cuda), FERRY_BENCH_BATCHES ("16 64"), FERRY_BENCH_DTYPES ("fp32 bf16"),
# FERRY_BENCH_NEW_TOKENS (128), FERRY_PYTHON (python3).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FERRY_BUILD:-$root/build}
bench=$build/tests/bench/generate_bench
device=${FERRY_BENCH_DEVICE:-cuda}
python=${FERRY_PYTHON:-python3}
new_tokens=${FERRY_BENCH_NEW_TOKENS:-128}
[ -x "$bench" ] || { echo "no $bench: cmake --build $build --target generate_bench" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
 "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
 "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 100000.0, "hidden_act": "silu",
 "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
JSON
for dtype in ${FERRY_BENCH_DTYPES:-fp32 bf16}; do
  for batch in ${FERRY_BENCH_BATCHES:-16 64}; do
    run() {  # graphs(1|0) -> the bench's line; tokens into $work/tokens-<graphs>.safetensors
      "$bench" --config "$work/config.json" --random-prompts "$batch" --device "$device" --dtype "$dtype" \
        --new-tokens "$new_tokens" --repeats 3 --cuda-graphs "$1" --tokens-out "$work/tokens-$1.safetensors" | head -1
    }
    on=$(run 1) || { echo "decode $dtype batch $batch: graphs on failed" >&2; continue; }
    off=$(run 0) || { echo "decode $dtype batch $batch: graphs off failed" >&2; continue; }
    rate() { sed -n 's/.* \([0-9.]*\) tokens\/s$/\1/p' <<< "$1"; }
    same=$(cmp -s "$work/tokens-1.safetensors" "$work/tokens-0.safetensors" && echo yes || echo NO)
    echo "decode $dtype batch $batch: graphs $(rate "$on") tokens/s, eager $(rate "$off") tokens/s," \
         "speed-up $("$python" -c "print(f'{$(rate "$on") / $(rate "$off"):.2f}')" 2>/dev/null || echo '?')x," \
         "same tokens: $same"
  done
done
# transformers' generate on the same shapes (other random weights: its speed only), when installed.
"$python" - "$device" "$new_tokens" "${FERRY_BENCH_DTYPES:-fp32 bf16}" ${FERRY_BENCH_BATCHES:-16 64} <<'PY' \
  || echo "decode transformers: not run"
import sys, time
try:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print(f"decode transformers: not installed here ({e.name})")
    sys.exit(0)
device, new_tokens, batches = sys.argv[1], int(sys.argv[2]), [int(b) for b in sys.argv[4:]]
dtypes = [{"fp32": torch.float32, "bf16": torch.bfloat16}[d] for d in sys.argv[3].split()]
config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                     num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                     rope_theta=100000.0, tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)
for dtype in dtypes:
    model = LlamaForCausalLM(config).to(device, dtype).eval()
    for batch in batches:
        g = torch.Generator().manual_seed(batch)
        prompts = []
        for _ in range(batch // 4):
            p = torch.randint(3, 49152, (int(torch.randint(16, 64, (1,), generator=g)),), generator=g)
            prompts += [p] * 4
        width = max(len(p) for p in prompts)
        ids = torch.zeros(batch, width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, p in enumerate(prompts):
            ids[r, width - len(p):] = p
            mask[r, width - len(p):] = 1
        ids, mask = ids.to(device), mask.to(device)
        def go():
            with torch.no_grad():
                out = model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                     do_sample=False, pad_token_id=0)
            if device == "cuda":
                torch.cuda.synchronize()
            return out
        go()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            go()
            times.append(time.perf_counter() - start)
        times.sort()
        name = "fp32" if dtype == torch.float32 else "bf16"
        print(f"decode transformers {name} batch {batch}: {batch * new_tokens / times[1]:.1f} tokens/s")
PY
