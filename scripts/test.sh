#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test (unit, integration, parity
# against the Python references in the deps venv; gpu tests skip without a GPU).
# Arguments go to ctest, e.g. `scripts/test.sh -L unit` or `scripts/test.sh -R config`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FERRY_BUILD:-$root/build}
"$root/scripts/build.sh"
cd "$build"
exec ctest --output-on-failure -j "${FERRY_JOBS:-$(nproc)}" "$@"
