# Sourced by the experiment scripts (ppo-learns.sh, grpo-learns.sh, int8-moments.sh) to read their
# common arguments, `[BUILD_DIR] [-- extra --set arguments]`: sets root (the checkout), build and
# ferry, shifts those arguments off the caller's "$@" (what is left goes to every run), cds to
# root and stops with a message when the ferry executable is missing.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
if [ "${1:-}" != "" ] && [ "${1:-}" != "--" ]; then
  build=$1
  shift
fi
[ "${1:-}" = "--" ] && shift || true
ferry="$build/ferry"
cd "$root"
[ -x "$ferry" ] || { echo "no $ferry: build it with scripts/build.sh ferry" >&2; exit 2; }
