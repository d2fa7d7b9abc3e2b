#!/usr/bin/env bash
# Tokenizer throughput, Ferry's BpeTokenizer (src/tokenizer/bpe_tokenizer.h) against the Python
# `tokenizers` library (Rust) on the same tokenizer.json files and corpus, both on one thread:
# tokenizers with RAYON_NUM_THREADS=1 and one encode() call per document (no encode_batch).
#
#   scripts/bench-tokenizer.sh [BUILD_DIR]
#
# The corpus (~4 MB, documents split at blank lines) is this checkout's Markdown and C++ sources,
# Python standard-library sources, and the multilingual mixed text of the parity fixture (CJK,
# Arabic, emoji, decomposed accents). Two tokenizers are trained on it with a 32,000 vocabulary,
# configured as Qwen2's (NFC + Split) and Llama 3's (Split, ignore_merges) tokenizer.json files.
# Prints characters (code points) per second for each side, cold (first pass: empty word caches)
# and warm (best of the next passes), the ratio Ferry / tokenizers, and whether the ids agree
# (a checksum of every id). Takes about a minute. BUILD_DIR (default build) gets tests/bench/
# tokenizer_bench built if it is missing (ferry_tokenizer only, not the whole tool).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
bench="$build/tests/bench/tokenizer_bench"
if [[ ! -x "$bench" ]]; then
  cmake --build "$build" --target tokenizer_bench -j "${FERRY_JOBS:-2}"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== corpus and tokenizers (training is not timed)"
RAYON_NUM_THREADS="$(nproc)" "$python" - "$work" "$here" <<'PY'
import pathlib, random, sys, sysconfig
work, root = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
sys.path.insert(0, str(root / "tests" / "parity"))
import tokenizer_bpe_ref as ref
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

def texts(paths, budget):
    out, size = [], 0
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        out.append(text)
        size += len(text)
        if size >= budget:
            break
    return out

parts = texts(sorted(root.glob("**/*.md")) + sorted((root / "src").glob("**/*.[ch]*")), 1_000_000)
parts += texts(sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")), 1_500_000)
parts.append(ref.corpus_text(random.Random(1), 1_500_000))
corpus = "\n\n".join(parts)
(work / "corpus.txt").write_text(corpus, encoding="utf-8")
documents = corpus.split("\n\n")
print(f"corpus: {len(corpus.encode()) / 1e6:.1f} MB, {len(corpus)} chars, {len(documents)} documents")

def train(name, pattern, normalizer, ignore_merges, specials):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=32000, min_frequency=2, show_progress=False, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(documents, trainer)
    tok.save(str(work / f"{name}.json"))
    if ignore_merges:  # the trainer does not carry it over; Llama 3's file sets it
        import json
        data = json.loads((work / f"{name}.json").read_text())
        data["model"]["ignore_merges"] = True
        (work / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False))
    print(f"{name}: vocabulary {Tokenizer.from_file(str(work / f'{name}.json')).get_vocab_size()}")

train("qwen2", ref.QWEN2_PATTERN, normalizers.NFC(), False, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
train("llama3", ref.LLAMA3_PATTERN, None, True, ["<|begin_of_text|>", "<|eot_id|>"])
PY

results="$work/results.txt"
for name in qwen2 llama3; do
  echo "== $name: Python tokenizers, 1 thread"
  RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "$python" - "$work/$name.json" "$work/corpus.txt" <<'PY' |
import sys, time
import tokenizers
from tokenizers import Tokenizer
path, corpus_path = sys.argv[1], sys.argv[2]
documents = open(corpus_path, encoding="utf-8", newline="").read().split("\n\n")
chars = sum(len(d) for d in documents)
start = time.perf_counter()
tok = Tokenizer.from_file(path)
load = time.perf_counter() - start
times = []
for rep in range(5):
    start = time.perf_counter()
    for doc in documents:
        tok.encode(doc, add_special_tokens=False)
    times.append(time.perf_counter() - start)
cold, warm = times[0], min(times[1:])
tokens, checksum = 0, 0  # untimed: what the ids are
for doc in documents:
    ids = tok.encode(doc, add_special_tokens=False).ids
    tokens += len(ids)
    checksum += sum(i * (k % 7 + 1) for k, i in enumerate(ids))
checksum %= 1 << 64
print(f"tokenizers {tokenizers.__version__}: {len(documents)} documents, {chars} chars, {tokens} tokens, load {load:.3f} s")
print(f"  cold {cold:.3f} s = {chars / cold:.3g} chars/s, warm best of 4: {warm:.3f} s = {chars / warm:.3g} chars/s")
print(f"RESULT py_cold_chars_per_s {chars / cold:.6g}")
print(f"RESULT py_warm_chars_per_s {chars / warm:.6g}")
print(f"RESULT py_tokens {tokens}")
print(f"RESULT py_checksum {checksum}")
PY
  sed "s/^RESULT /RESULT $name /" | tee -a "$results" | grep -v '^RESULT'
  echo "== $name: Ferry, 1 thread"
  "$bench" --tokenizer "$work/$name.json" --corpus "$work/corpus.txt" --reps 5 |
    sed "s/^RESULT /RESULT $name /" | tee -a "$results" | grep -v '^RESULT'
done

echo "== Summary (chars/s, one thread; ratio = Ferry / tokenizers; target >= 1x)"
"$python" - "$results" <<'PY'
import sys
r = {}
for line in open(sys.argv[1]):
    if line.startswith("RESULT "):
        _, name, what, value = line.split()
        r[(name, what)] = float(value)
print(f"{'tokenizer':>10} {'ferry warm':>12} {'py warm':>12} {'ratio':>7} {'ferry cold':>12} {'py cold':>12} {'ratio':>7}  ids")
for name in ("qwen2", "llama3"):
    g = lambda what: r[(name, what)]
    same = g("ferry_checksum") == g("py_checksum") and g("ferry_tokens") == g("py_tokens")
    print(f"{name:>10} {g('ferry_warm_chars_per_s'):12.4g} {g('py_warm_chars_per_s'):12.4g} "
          f"{g('ferry_warm_chars_per_s') / g('py_warm_chars_per_s'):6.2f}x {g('ferry_cold_chars_per_s'):12.4g} "
          f"{g('py_cold_chars_per_s'):12.4g} {g('ferry_cold_chars_per_s') / g('py_cold_chars_per_s'):6.2f}x  "
          f"{'equal' if same else 'DIFFER'} ({int(g('ferry_tokens'))} tokens)")
PY
