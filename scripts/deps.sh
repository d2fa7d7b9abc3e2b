#!/usr/bin/env bash
# Installs everything Ferry builds and tests against, idempotently and quietly when all is there:
#   - Debian packages for the C++ libraries and tools, from scripts/debian-packages.txt (apt-get when
#     root, else the command is printed);
#   - a Python venv in the deps cache ($FERRY_DEPS, default ~/.cache/ferry) holding libtorch from the
#     PyPI torch wheel (pinned) and the Python reference packages the parity tests compare against,
#     llama.cpp among them (llama-cpp-python, compiled once into a cached wheel; its converter script).
# Re-running is cheap: a stamp file records what was installed for which requirement set.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
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
# llama.cpp for the GGUF tests: llama-cpp-python (pinned in requirements.txt) is published as an
# sdist only, so its llama.cpp is compiled here once, CPU only, without its extras (mtmd, RPC) and
# for AVX2 rather than this CPU (-march=native), into a wheel kept in $deps/wheels that the install
# below takes instead of the sdist (a changed pin or flag set builds a new one). The same sdist's
# vendor/llama.cpp holds llama.cpp's convert_lora_to_gguf.py: it and what it imports go to
# $venv/share/llama.cpp, where tests/integration/io_gguf_adapter_export_test.cpp finds it.
llama_pin=$(grep -E '^llama-cpp-python==' "$req" || true)
llama_cmake="-DLLAVA_BUILD=OFF -DGGML_RPC=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
want=$( (cat "$req"; echo "$llama_cmake") | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  exit 0
fi
mkdir -p "$deps"
if [ ! -x "$venv/bin/python" ]; then
  say "creating venv $venv"
  python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
links=()
if [ -n "$llama_pin" ]; then
  llama_version=${llama_pin#*==}
  sdist=$deps/src/llama_cpp_python-$llama_version.tar.gz
  wheels=$deps/wheels/llama-cpp-python-$( (echo "$llama_pin"; echo "$llama_cmake") | sha256sum | cut -c1-12)
  [ -f "$sdist" ] || "${pip[@]}" download --no-deps --no-binary :all: -d "$deps/src" "$llama_pin"
  if ! compgen -G "$wheels/*.whl" > /dev/null; then
    say "compiling llama.cpp ($llama_pin, CPU only) into $wheels (once: ~5 minutes on 2 cores)"
    rm -rf "$wheels.tmp"
    CMAKE_ARGS=$llama_cmake CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "${pip[@]}" wheel --no-deps -w "$wheels.tmp" "$sdist"
    mv "$wheels.tmp" "$wheels"
  fi
  links=(--find-links "$wheels" --only-binary llama-cpp-python)
fi
say "installing Python packages from $req into $venv (first time: a few minutes, ~5 GB)"
"${pip[@]}" install -r "$req" "${links[@]}"
if [ -n "$llama_pin" ]; then
  share=$venv/share/llama.cpp
  rm -rf "$share" && mkdir -p "$share"
  tar -xzf "$sdist" -C "$share" --strip-components=3 \
    "llama_cpp_python-$llama_version/vendor/llama.cpp/"{convert_lora_to_gguf.py,convert_hf_to_gguf.py,conversion,gguf-py}
fi
"$venv/bin/python" - <<'PY'
import torch
print(f"deps: torch {torch.__version__} (CUDA {torch.version.cuda}) at {torch.utils.cmake_prefix_path}")
PY
echo "$want" > "$stamp"
