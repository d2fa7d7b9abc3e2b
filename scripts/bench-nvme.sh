#!/usr/bin/env bash
# The NVMe tier's AdamW throughput (offload.optimizer_state_tier nvme) against the host tier and
# against the disk's own bandwidth, measured in the same run (tests/bench/nvme_adamw_bench.cpp):
# one AdamW step of a bf16 model's parameters with fp32 master weights and fp32 moments, the
# 12 B/param of state read from and written back to a working file with O_DIRECT, the CPU step of
# each window overlapped with the next windows' reads and the last one's write. Target: the NVMe
# tier reaches >= 70% of what the disk's read + write bandwidth allows.
#
#   scripts/bench-nvme.sh [FOLDER]     (default: $FERRY_NVME_DIR, else a folder under /tmp)
# Environment: FERRY_BUILD (build dir, default build), FERRY_BENCH_PARAMS_M (default 200: 2.4 GB of
# state on disk), FERRY_BENCH_THREADS (default: all cores). Takes about a minute.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${FERRY_BUILD:-build}"
dir="${1:-${FERRY_NVME_DIR:-}}"
cleanup=""
if [[ -z "$dir" ]]; then
  dir="$(mktemp -d /tmp/ferry-bench-nvme.XXXXXX)"
  cleanup="$dir"
fi
trap '[[ -n "$cleanup" ]] && rm -rf "$cleanup"' EXIT
cd "$here"
cmake --build "$build" --target nvme_adamw_bench >/dev/null
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; folder $dir on $(df --output=source,fstype "$dir" | tail -1 | xargs)"
"$build/tests/bench/nvme_adamw_bench" --dir "$dir" --params-m "${FERRY_BENCH_PARAMS_M:-200}" \
  --threads "${FERRY_BENCH_THREADS:-0}" --reps 5
