#!/usr/bin/env bash
# Fuzzes Ferry's parsers with libFuzzer under AddressSanitizer + UndefinedBehaviorSanitizer:
# every tests/fuzz/<name>_fuzz.cpp target (or the ones named) runs for SECONDS (default 60),
# starting from its seed corpus (tests/fuzz/corpus/<name>) and what earlier runs found (kept in
# $build/corpus/<name>, outside the checkout). An input that crashes, hangs, trips a sanitizer or
# makes a parser throw anything but a UserError is written to tests/fuzz/regressions/<name>/,
# which CI replays (ctest -L fuzz) — commit it with the fix.
#
#   scripts/fuzz.sh [SECONDS] [NAME...]        # e.g. scripts/fuzz.sh 600 safetensors config
#
# Needs clang with libFuzzer (Debian: clang-14 libclang-rt-14-dev; FERRY_CLANG=clang++-NN picks
# another). The build ($FERRY_FUZZ_BUILD, default build-fuzz/) compiles only what the targets use.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
shift || true
build=${FERRY_FUZZ_BUILD:-$root/build-fuzz}
clangxx=${FERRY_CLANG:-$(command -v clang++-14 || command -v clang++ || true)}
if [[ -z $clangxx ]]; then
  echo "fuzz: no clang++ found; install it: apt-get install clang-14 libclang-rt-14-dev" >&2
  exit 2
fi
"$root/scripts/deps.sh"
deps=${FERRY_DEPS:-$HOME/.cache/ferry}
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$clangxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFERRY_CUDA=OFF -DFERRY_FUZZ=ON -DFERRY_SANITIZE=address,undefined \
    -DCMAKE_PREFIX_PATH="$("$deps/venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    > "$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
  rm -f "$build.configure.log"
fi

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for src in "$root"/tests/fuzz/*_fuzz.cpp; do names+=("$(basename "$src" _fuzz.cpp)"); done
fi
targets=()
for name in "${names[@]}"; do targets+=("fuzz_$name"); done
cmake --build "$build" -j "${FERRY_JOBS:-$(nproc)}" --target "${targets[@]}"

# libtorch is not instrumented: its allocations and one-definition copies are not findings.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:alloc_dealloc_mismatch=0:detect_odr_violation=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
summary=()
for name in "${names[@]}"; do
  corpus=$build/corpus/$name
  regressions=$root/tests/fuzz/regressions/$name
  mkdir -p "$corpus" "$regressions"
  log=$build/fuzz_$name.log
  echo "fuzz: $name for ${seconds}s (log: $log)"
  before=$(find "$regressions" -type f | wc -l)
  start=$(date +%s)
  if "$build/tests/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
       -artifact_prefix="$regressions/" "$corpus" "$root/tests/fuzz/corpus/$name" > "$log" 2>&1; then
    result="no finding"
  else
    result="FINDING (see $log; inputs in $regressions)"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [[ -z $runs ]] && runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  after=$(find "$regressions" -type f | wc -l)
  line=$(printf '%-15s %5ss  %10s inputs  corpus %5s files  %s' "$name" "$(( $(date +%s) - start ))" "${runs:-?}" \
    "$(find "$corpus" -type f | wc -l)" "$result$([[ $after -gt $before ]] && echo ", $((after - before)) new regression inputs")")
  echo "  $line"
  summary+=("$line")
done
echo
echo "fuzz summary (${seconds}s per target, ASan + UBSan):"
printf '  %s\n' "${summary[@]}"
exit $status
