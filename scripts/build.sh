#!/usr/bin/env bash
# Installs dependencies (scripts/deps.sh), configures once and builds Ferry into $FERRY_BUILD
# (default: build/). Extra CMake arguments: FERRY_CMAKE_ARGS="-DFERRY_CUDA=OFF".
# Arguments name targets to build (e.g. `scripts/build.sh ferry`: the executable only, which is
# what the demo needs); none: everything, the tests included.
# Environment: FERRY_BUILD, FERRY_CMAKE_ARGS (above), FERRY_JOBS (default all cores), FERRY_DEPS (scripts/deps.sh).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FERRY_BUILD:-$root/build}
"$root/scripts/deps.sh"
if [ ! -f "$build/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" -G Ninja ${FERRY_CMAKE_ARGS:-} > "$build.configure.log" 2>&1 || {
    cat "$build.configure.log" >&2; exit 1; }
  rm -f "$build.configure.log"
fi
jobs=${FERRY_JOBS:-$(nproc)}
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
