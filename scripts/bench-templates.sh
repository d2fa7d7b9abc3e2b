#!/usr/bin/env bash
# Chat-template rendering speed: Ferry's Jinja renderer (src/tokenizer/jinja) against transformers'
# apply_chat_template(..., tokenize=False), in the same run, on the parity corpus: the 52 chat
# templates in tests/data/chat-templates and three synthetic ones with {% generation %} blocks,
# times 16 conversations (tool calls, reasoning, unicode, ...),
# as tests/parity/jinja_templates_ref.py writes them. Both sides render each conversation that
# transformers renders (its compiled templates are cached, as Ferry's are parsed once), one thread,
# best pass of several; Ferry's texts are checked against transformers'.
#
#   scripts/bench-templates.sh [BUILD_DIR]
#
# Prints conversations/s for each, the ratio Ferry / transformers (target >= 10x) and the CPU.
# BUILD_DIR (default build) gets tests/bench/jinja_templates_bench built if missing (ferry_jinja
# only: no libtorch). Takes under a minute.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
bench="$build/tests/bench/jinja_templates_bench"
if [[ ! -x "$bench" ]]; then
  cmake --build "$build" --target jinja_templates_bench -j "${FERRY_JOBS:-2}"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== corpus (transformers renders every case once; not timed)"
"$python" "$here/tests/parity/jinja_templates_ref.py" "$work"

results="$work/results.txt"
echo "== transformers apply_chat_template(tokenize=False), 1 thread"
"$python" - "$work/cases.json" "$here/tests/parity" <<'PY' | tee -a "$results" | grep -v '^RESULT'
import json, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[2])
import jinja_templates_ref as ref  # pins strftime_now, builds the same minimal tokenizer
import transformers
fixture = json.load(open(sys.argv[1], encoding="utf-8"))
tok = ref.make_tokenizer()
special = {"bos_token", "eos_token"}
calls = []
for case in fixture["cases"]:
    if "expected" not in case:
        continue
    v = dict(case["variables"])
    source = fixture["templates"][case["template"]]
    kwargs = dict(tools=v.pop("tools"), documents=v.pop("documents"), chat_template=source, tokenize=False,
                  add_generation_prompt=v.pop("add_generation_prompt"))
    messages = v.pop("messages")
    kwargs.update({k: x for k, x in v.items() if k not in special})
    calls.append((messages, kwargs, case["expected"]))
mismatches = sum(tok.apply_chat_template(m, **k) != e for m, k, e in calls)  # warms the template cache
times = []
for rep in range(5):
    start = time.perf_counter()
    for messages, kwargs, _ in calls:
        tok.apply_chat_template(messages, **kwargs)
    times.append(time.perf_counter() - start)
best = min(times)
print(f"transformers {transformers.__version__}: {len(calls)} conversations in {best * 1e3:.1f} ms (best of 5) = "
      f"{len(calls) / best:.0f} conversations/s; {mismatches} differ from the fixture")
print(f"RESULT py_conversations_per_s {len(calls) / best:.6g}")
PY
echo "== Ferry, 1 thread"
"$bench" --cases "$work/cases.json" --reps 20 | tee -a "$results" | grep -v '^RESULT'

echo "== Summary"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
"$python" - "$results" "$cpu" <<'PY'
import sys
r = {}
for line in open(sys.argv[1]):
    if line.startswith("RESULT "):
        _, what, value = line.split()
        r[what] = float(value)
ferry, py = r["ferry_conversations_per_s"], r["py_conversations_per_s"]
print(f"host CPU: {sys.argv[2]}")
print(f"{int(r['conversations'])} conversations: Ferry {ferry:,.0f}/s, transformers {py:,.0f}/s, "
      f"ratio {ferry / py:.1f}x (target >= 10x); Ferry's texts differ in {int(r['ferry_mismatches'])}")
PY
