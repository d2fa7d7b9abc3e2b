# Sourced first thing by every scripts/*.sh, with the script's arguments:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"
# When the script runs (is not itself sourced by another) and its first argument is -h or --help,
# prints the script's opening comment block (what it does, its arguments and environment) and
# exits 0 before the script does any work. Otherwise it does nothing.
if [[ ${1:-} == -h || ${1:-} == --help ]] && [[ ${BASH_SOURCE[1]:-} == "$0" ]]; then
  awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
  exit 0
fi
