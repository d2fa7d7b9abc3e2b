#!/usr/bin/env bash
# Checks that Ferry's sources include only from their own floor and the floors below it, as
# docs/architecture.md's floor table (the fenced block after "<!-- floors -->") lists them: each
# line is one level, top to bottom; folders on one line are peers and may not include each other;
# a file belongs to the longest folder that holds it. Prints every upward include as
# "FILE:LINE: includes HEADER, from room R/, above this file's room S/" and exits 1 when there is one.
#
#   scripts/check-layers.sh            # the check (scripts/test.sh runs it)
#   scripts/check-layers.sh --counts   # also the include counts between rooms, for reviews
#   scripts/check-layers.sh --root DIR # another checkout (tests/scripts/check_layers_test.sh)
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
args=()
while (($#)); do
  case $1 in
    --root) root=$(cd "$2" && pwd); shift 2 ;;
    --counts) args+=(--counts); shift ;;
    *) echo "check-layers.sh: unknown argument '$1' (--counts, --root DIR)" >&2; exit 2 ;;
  esac
done
exec python3 - "$root" "${args[@]}" <<'PY'
import os, re, sys
from collections import Counter

root, counts = sys.argv[1], "--counts" in sys.argv[2:]
doc = os.path.join(root, "docs", "architecture.md")
lines = open(doc, encoding="utf-8").read().split("\n")
try:
    start = lines.index("<!-- floors -->")
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("```")) + 1
    last = next(i for i in range(first, len(lines)) if lines[i].startswith("```"))
except (ValueError, StopIteration):
    sys.exit(f"{doc}: no floor table (a fenced block after the line <!-- floors -->)")

level = {}   # folder -> its level (0 is the top)
for n, line in enumerate(lines[first:last]):
    words = line.split()
    if not words or words[0] == "floor":
        continue
    # "name  folder folder" starts a floor; an indented line is a lower level of the same floor.
    folders = words if line.startswith(" ") else words[1:]
    for folder in folders:
        if not os.path.isdir(os.path.join(root, folder)):
            sys.exit(f"{doc}:{first + n + 1}: floor table names {folder}/, which does not exist")
        level[folder] = n

def room(path):
    best = None
    for folder in level:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best

include = re.compile(r'\s*#\s*include\s+"([^"]+)"')
upward, pairs, files = [], Counter(), 0
for folder in sorted(level):
    for directory, subdirs, names in os.walk(os.path.join(root, folder)):
        subdirs.sort()
        for name in sorted(names):
            if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                continue
            path = os.path.relpath(os.path.join(directory, name), root)
            here = room(path)
            if here != folder:
                continue  # a subfolder that is a room of its own: walked under its name
            files += 1
            for number, text in enumerate(open(os.path.join(root, path), encoding="utf-8", errors="replace"), 1):
                m = include.match(text)
                if not m:
                    continue
                there = room(m.group(1))
                if there is None or there == here:
                    continue
                pairs[(here, there)] += 1
                if level[there] <= level[here]:
                    side = "a peer of" if level[there] == level[here] else "above"
                    upward.append(f"{path}:{number}: includes {m.group(1)}, from room {there}/, {side} this file's room {here}/")

if counts:
    print("includes between rooms (from -> to: count):")
    for (a, b), c in sorted(pairs.items(), key=lambda kv: (level[kv[0][0]], kv[0])):
        print(f"  {a:22} -> {b:22} {c}")
for line in upward:
    print(line)
if upward:
    print(f"check-layers: {len(upward)} upward include(s) in {files} files; the floors are in docs/architecture.md "
          "(move the shared piece down a floor, or the includer up)", file=sys.stderr)
    sys.exit(1)
print(f"check-layers: {files} files, {sum(pairs.values())} includes between rooms, none upward")
PY
