# Sourced by the experiment scripts (ppo-learns.sh, grpo-learns.sh, int8-moments.sh, ...) to read their
# common arguments, `[BUILD_DIR] [-- extra --set arguments]`: sets root (the checkout), build and
# ferry, shifts those arguments off the caller's "$@" (what is left goes to every run), cds to
# root and stops with a message when the ferry executable is missing.
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
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

# The demo SFT model the fine-tuning experiments start from (runs/demo/sft/final), trained with
# configs/demo-sft.yaml first when missing (~2.5 min on 2 cores). $1: the calling script's name.
ensure_demo_sft_model() {
  if [[ ! -f runs/demo/sft/final/model.safetensors ]]; then
    echo "$1: training the demo SFT model into runs/demo/sft first"
    "$ferry" train-sft --config configs/demo-sft.yaml --set train.device=cpu --set logging.progress=never | tail -1
  fi
}
