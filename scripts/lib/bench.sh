# Sourced by the benchmarks that run one tests/bench program beside a Python reference:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh" TARGET DEFAULT_THREADS "$@"
# with the script's own arguments [BUILD_DIR] [THREADS] after the first two. Sets `here` (the
# checkout), `build` (BUILD_DIR, default build), `threads` (THREADS, default DEFAULT_THREADS),
# `python` ($FERRY_PYTHON, else the deps venv's), `bench` (BUILD_DIR/tests/bench/TARGET; exits 2
# saying how to build it when missing) and `work` (a scratch folder removed on exit).
bench_target="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${3:-$here/build}"
threads="${4:-$2}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
bench="$build/tests/bench/$bench_target"
[[ -x "$bench" ]] || { echo "error: $bench not found; build it: cmake --build $build --target $bench_target" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
