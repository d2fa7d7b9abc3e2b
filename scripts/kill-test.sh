#!/usr/bin/env bash
# Crash consistency, the long way: each stage (SFT, RM, PPO on the demo shape) is run once without
# interruption, then again SIGKILLed KILLS times in a row at random moments — at a random time
# (mostly mid-step) or, through FERRY_FAILPOINT (core/failpoint.h), halfway through a random
# file it writes (a checkpoint, or the final/ export) — resuming each time with train.resume=auto,
# and finally run to the end. The final weights must equal the uninterrupted run's byte for byte.
#
#   scripts/kill-test.sh [KILLS] [STAGES]     # defaults: 10 "sft rm ppo"; SEED=1, FERRY_KILL_DIR
#
# Prints, per stage, where each kill landed and whether the weights match; exits 1 on a mismatch.
# An attempt that finds the run already ended (the random moment came after its end, or the run
# wrote fewer files than the failpoint's number) is no kill: the summary counts those apart. A kill
# lands mid-checkpoint or mid-export when that process's own staging folder was there, mid-write of
# another file (metrics.jsonl, config.yaml, ...) for the failpoint's other files or a staged file of
# its own, "mid-run" when the killed process had logged a step of its own (inside a step or between
# two: logging, evaluation; the script cannot tell which) and at start-up before that.
# The CI version (a few fixed kills) is tests/integration/train_crash_consistency_test.cpp.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kills=${1:-10}
stages=${2:-sft rm ppo}
ferry=${FERRY_BIN:-$root/build/ferry}
work=${FERRY_KILL_DIR:-${TMPDIR:-/tmp}/ferry-kill-test}
RANDOM=${SEED:-1}
[[ -x $ferry ]] || { echo "kill-test: $ferry not built (scripts/build.sh)" >&2; exit 2; }
cd "$root"
rm -rf "$work" && mkdir -p "$work"
quiet="--set train.device=cpu --set logging.progress=never --set logging.tensorboard=false"

declare -A total_steps=([sft]=40 [rm]=24 [ppo]=12)
stage_args() {  # stage_args STAGE OUTPUT_DIR
  case $1 in
    sft) echo "train-sft --config configs/demo-sft.yaml --set data.max_samples=256 --set data.eval_file=" \
              "--set data.prompt_file= --set train.micro_batch_size=16 --set train.max_steps=${total_steps[sft]}" \
              "--set train.save_every=8 --set train.warmup_steps=4 --set output.keep_last=2 --set output.dir=$2 $quiet" ;;
    rm) echo "train-rm --config configs/demo-rm.yaml --set model.path=$work/sft_reference/final" \
             "--set data.max_samples=256 --set data.eval_file= --set train.micro_batch_size=8 --set train.max_steps=${total_steps[rm]}" \
             "--set train.save_every=6 --set train.warmup_steps=0 --set output.keep_last=2 --set output.dir=$2 $quiet" ;;
    ppo) echo "train-ppo --config configs/demo-ppo.yaml --set model.path=$work/sft_reference/final" \
              "--set ppo.reward_model=$work/rm_reference/final --set data.eval_file= --set ppo.rollout_batch_size=8" \
              "--set train.micro_batch_size=8 --set ppo.ppo_epochs=2 --set train.max_steps=${total_steps[ppo]} --set train.save_every=3" \
              "--set output.keep_last=2 --set output.dir=$2 $quiet" ;;
  esac
}

seen=" "
for stage in $stages; do
  case $stage in
    sft) ;;
    rm) [[ $seen == *" sft "* ]] || { echo "kill-test: rm needs sft before it in STAGES" >&2; exit 2; } ;;
    ppo) [[ $seen == *" sft "* && $seen == *" rm "* ]] || { echo "kill-test: ppo needs sft and rm before it in STAGES" >&2; exit 2; } ;;
    *) echo "kill-test: unknown stage '$stage' (sft, rm, ppo)" >&2; exit 2 ;;
  esac
  seen+="$stage "
done

# Steps a run folder's metrics.jsonl has logged (0 without one).
logged_steps() { local n; n=$(grep -c '"step"' "$1/metrics.jsonl" 2>/dev/null) || true; echo "${n:-0}"; }

# Files a stage's uninterrupted run writes (FERRY_FAILPOINT=write:trace), to draw kill points from.
count_writes() { grep -c '^ferry failpoint: write ' "$1" || true; }

status=0
summary=()
for stage in $stages; do
  ref=$work/${stage}_reference
  start=$(date +%s.%N)
  FERRY_FAILPOINT=write:trace $ferry $(stage_args "$stage" "$ref") > "$ref.log" 2>&1 ||
    { echo "kill-test: the uninterrupted $stage run failed:"; tail -20 "$ref.log"; exit 1; }
  seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  writes=$(count_writes "$ref.log")
  out=$work/${stage}_killed
  mid_run=0 mid_checkpoint=0 mid_export=0 other_file=0 before_start=0 finished_early=0
  for ((i = 1; i <= kills; i++)); do
    resume=""; [[ $i -gt 1 ]] && resume="--set train.resume=auto"
    log=$out.kill$i.log
    if ((RANDOM % 5 < 2)); then  # a kill at a random moment of what is left of the run
      newest=$( (ls -d "$out"/step-* 2>/dev/null || true) | sed 's/.*step-//' | sort -n | tail -1)
      delay=$(awk -v s="$seconds" -v r=$((RANDOM % 100)) -v done="${newest:-0}" -v total="${total_steps[$stage]}" \
        'BEGIN { printf "%.2f", s * (1 - done / total) * r / 100 }')
      steps_before=$(logged_steps "$out")
      $ferry $(stage_args "$stage" "$out") $resume > "$log" 2>&1 &
      pid=$!
      sleep "$delay"
      kill -9 $pid 2>/dev/null || true
      rc=0; wait $pid 2>/dev/null || rc=$?
      # kill succeeds on a run that has ended but not been waited for: only the exit status (128 + 9)
      # says the signal ended it. What it was doing: the staging folders and files named with its pid
      # (write_folder_atomic, AtomicFileWriter; an earlier kill's leftovers carry another pid), else
      # whether it had logged a step of its own.
      if ((rc == 137)); then
        if compgen -G "$out/.step-*.tmp-$pid" > /dev/null; then mid_checkpoint=$((mid_checkpoint + 1)); where="checkpoint (time)"
        elif compgen -G "$out/.final*.tmp-$pid" > /dev/null; then mid_export=$((mid_export + 1)); where="final export (time)"
        elif compgen -G "$out/*.tmp-$pid-*" > /dev/null; then other_file=$((other_file + 1)); where="writing $(basename "$(compgen -G "$out/*.tmp-$pid-*" | head -1)") (time)"
        elif (($(logged_steps "$out") > steps_before)); then mid_run=$((mid_run + 1)); where="mid-run, after a step it logged (time)"
        else before_start=$((before_start + 1)); where="start-up, before its first logged step (time)"; fi
      else
        finished_early=$((finished_early + 1)); where="no kill: the run ended first (exit $rc)"
      fi
      echo "  $stage kill $i: ${delay}s in -> $where"
    else  # halfway through the K-th file this process writes
      newest=$( (ls -d "$out"/step-* 2>/dev/null || true) | sed 's/.*step-//' | sort -n | tail -1)
      left=$(awk -v w="$writes" -v done="${newest:-0}" -v total="${total_steps[$stage]}" \
        'BEGIN { n = int(w * (1 - done / total)) + 1; print (n < 1 ? 1 : n) }')
      k=$((RANDOM % left + 1))
      FERRY_FAILPOINT=write:$k:kill $ferry $(stage_args "$stage" "$out") $resume > "$log" 2>&1 &
      wait $! 2>/dev/null || true
      file=$(sed -n 's/^ferry failpoint: killed while writing //p' "$log" | sed 's/\.tmp-[0-9-]*$//')
      case $file in
        "") finished_early=$((finished_early + 1)); where="no kill: the run wrote fewer than $k files" ;;
        *"/.final"*) mid_export=$((mid_export + 1)); where="final export: $(basename "$(dirname "$file")")/$(basename "$file")" ;;
        *"/.step-"*) mid_checkpoint=$((mid_checkpoint + 1)); where="checkpoint: ${file##*/.}" ;;
        *) other_file=$((other_file + 1)); where="another file: $(basename "$file")" ;;
      esac
      echo "  $stage kill $i: file $k -> $where"
    fi
    # Whatever a kill left, the next run must start from the last complete checkpoint or from scratch.
    rm -rf "$out/final" "$out/final_"*  # a run that ended before its kill would skip the remaining ones
  done
  $ferry $(stage_args "$stage" "$out") --set train.resume=auto > "$out.last.log" 2>&1 ||
    { echo "kill-test: the last $stage resume failed:"; tail -20 "$out.last.log"; exit 1; }
  if cmp -s "$ref/final/model.safetensors" "$out/final/model.safetensors"; then result="equal"; else result="DIFFERENT"; status=1; fi
  landed=$((kills - finished_early))
  line=$(printf '%-4s %3d attempts, %3d kills: %2d mid-checkpoint, %2d mid-export, %2d mid-write of another file, %2d mid-run, %2d at start-up; %2d found the run ended -> final weights %s' \
    "$stage" "$kills" $landed $mid_checkpoint $mid_export $other_file $mid_run $before_start $finished_early $result)
  echo "$line"
  summary+=("$line")
done
echo
echo "kill-test (seed ${SEED:-1}):"
printf '  %s\n' "${summary[@]}"
exit $status
