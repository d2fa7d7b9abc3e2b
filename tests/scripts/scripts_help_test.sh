#!/usr/bin/env bash
# Every scripts/*.sh answers -h and --help with what it does and takes (its opening comment block,
# scripts/lib/help.sh) and exits 0 at once, having started no work: no dependency install, no
# build, no run. Each call must end within 3 seconds (a deps check alone takes longer), print
# something, and leave FERRY_DEPS / FERRY_BUILD (pointed at fresh scratch paths) uncreated.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
count=0
for script in "$here"/scripts/*.sh; do
  name=scripts/$(basename "$script")
  for flag in --help -h; do
    count=$((count + 1))
    start=$(date +%s%N)
    rc=0
    out=$(cd "$scratch" && FERRY_DEPS="$scratch/deps" FERRY_BUILD="$scratch/build" OUT="$scratch/out" \
          timeout 10 bash "$script" "$flag" 2>&1) || rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    problem=""
    [[ $rc -eq 0 ]] || problem="exit $rc"
    [[ -n ${out//[[:space:]]/} ]] || problem="${problem:+$problem, }no output"
    (( ms < 3000 )) || problem="${problem:+$problem, }took $ms ms"
    for made in deps build out; do
      [[ ! -e $scratch/$made ]] || problem="${problem:+$problem, }created \$$made"
    done
    rm -rf "${scratch:?}"/deps "${scratch:?}"/build "${scratch:?}"/out
    if [[ -n $problem ]]; then
      echo "FAIL $name $flag: $problem; output:" >&2
      printf '%s\n' "$out" | head -20 | sed 's/^/    /' >&2
      failed=1
    fi
  done
done
[[ $failed -eq 0 ]] || exit 1
echo "scripts --help: $count calls, every one printed its help and exited 0 within 3 s"
