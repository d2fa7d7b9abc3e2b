#!/usr/bin/env bash
# Builds Ferry with AddressSanitizer + UndefinedBehaviorSanitizer (FERRY_SANITIZE) into
# $FERRY_SANITIZE_BUILD (default build-sanitize/) and runs tests under them.
#
#   scripts/sanitize.sh          # CI: the torch-free libraries (core, core/config, kernels/cpu,
#                                # src/tokenizer/jinja) under their unit tests, and the config and
#                                # Jinja fuzz corpora replayed
#   scripts/sanitize.sh all      # every test, libtorch-linked ones included (slow: not in CI; on 2
#                                # cores ~1 h to build the 402 targets, ~15 min for the 757 tests)
#
# Any sanitizer report fails the test that triggered it (halt_on_error). libtorch itself is not
# instrumented, so its allocations and duplicate symbols are not reported.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FERRY_SANITIZE_BUILD:-$root/build-sanitize}
mode=${1:-torch-free}
"$root/scripts/deps.sh"
deps=${FERRY_DEPS:-$HOME/.cache/ferry}
if [[ ! -f $build/build.ninja ]]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_CUDA=OFF \
    -DFERRY_SANITIZE=address,undefined ${FERRY_CMAKE_ARGS:-} \
    -DCMAKE_PREFIX_PATH="$("$deps/venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    > "$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
  rm -f "$build.configure.log"
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:alloc_dealloc_mismatch=0:detect_odr_violation=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
jobs=${FERRY_JOBS:-$(nproc)}
start=$(date +%s)
if [[ $mode == all ]]; then
  cmake --build "$build" -j "$jobs"
  ctest --test-dir "$build" --output-on-failure -j "$jobs"
else
  # The torch-free code (ferry_base: core (child processes too), config; ferry_kernels_cpu; ferry_jinja) under its unit
  # tests, and the config parser's and Jinja renderer's fuzz corpora and regressions. The other
  # parsers link libtorch modules; they run sanitized under scripts/fuzz.sh.
  targets=(config_test text_test fuzz_config fuzz_jinja)
  for src in "$root"/tests/unit/{kernels,jinja,core}_*_test.cpp; do targets+=("$(basename "$src" .cpp)"); done
  cmake --build "$build" -j "$jobs" $(printf -- '--target %s ' "${targets[@]}")
  names=$(printf '%s|' "${targets[@]}" | sed 's/fuzz_\(config\|jinja\)/fuzz_replay_\1/g; s/|$//')
  ctest --test-dir "$build" --output-on-failure -j "$jobs" -R "^($names)([.]|$)"
fi
echo "sanitize ($mode): passed in $(( $(date +%s) - start )) s"
