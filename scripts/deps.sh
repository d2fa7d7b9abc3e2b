#!/usr/bin/env bash
# Installs everything Ferry builds and tests against, idempotently and quietly when all is there:
#   - Debian packages for the C++ libraries and tools, from scripts/debian-packages.txt (apt-get when
#     root, else the command is printed);
#   - a Python venv in the deps cache ($FERRY_DEPS, default ~/.cache/ferry) holding libtorch from the
#     PyPI torch wheel (pinned) and the Python reference packages the parity tests compare against.
# Re-running is cheap: a stamp file records what was installed for which requirement set.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
deps=${FERRY_DEPS:-$HOME/.cache/ferry}
venv=$deps/venv
say() { [ "${FERRY_QUIET:-0}" = 1 ] || echo "deps: $*"; }

# --- Debian packages -------------------------------------------------------------------------
# The one list: scripts/debian-packages.txt (gpu-check.sh carries its `lib` lines to the GPU machine).
source "$here/debian-packages.sh"
mapfile -t apt_pkgs < <(debian_packages install)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "deps: missing Debian packages. Run, then re-run this script:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 2
  fi
fi

# --- Python venv with libtorch and the reference packages -------------------------------------
# python3 -m venv needs ensurepip; pyenv / Debian's python3-venv both provide it.
req=$here/requirements.txt
stamp=$venv/.ferry-stamp
want=$(cat "$req" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  exit 0
fi
mkdir -p "$deps"
if [ ! -x "$venv/bin/python" ]; then
  say "creating venv $venv"
  python3 -m venv "$venv"
fi
say "installing Python packages from $req into $venv (first time: a few minutes, ~5 GB)"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
"$venv/bin/python" - <<'PY'
import torch
print(f"deps: torch {torch.__version__} (CUDA {torch.version.cuda}) at {torch.utils.cmake_prefix_path}")
PY
echo "$want" > "$stamp"
