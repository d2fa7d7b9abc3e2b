#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs the demo pipeline (SFT -> RM -> PPO) on the
# shipped data/ with configs/demo.yaml — on the GPU when one is visible, else on the CPU.
# Arguments go to `ferry pipeline`, e.g. `scripts/demo.sh --set train.device=cpu`.
# Environment: FERRY_BUILD (build folder, default build/), FERRY_DEPS (the deps cache scripts/deps.sh fills,
# default ~/.cache/ferry), FERRY_JOBS (build jobs, default all cores).
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FERRY_BUILD:-$root/build}
"$root/scripts/build.sh" ferry  # the executable only; the tests are scripts/test.sh's
cd "$root"
exec "$build/ferry" pipeline --config configs/demo.yaml "$@"
