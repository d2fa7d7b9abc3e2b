# Sourced by scripts/deps.sh and scripts/gpu-check.sh: reads scripts/debian-packages.txt.
#   debian_packages install   every package a developer or CI machine installs (tools, -dev packages)
#   debian_packages carry     what the GPU machine lacks: each `lib` line's -dev and runtime packages
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
debian_packages() {
  local list
  list="$(dirname "${BASH_SOURCE[0]}")/debian-packages.txt"
  case "$1" in
    install) awk '{ sub(/#.*/, "") } NF >= 2 { print $2 }' "$list" ;;
    carry) awk '{ sub(/#.*/, "") } $1 == "lib" { for (i = 2; i <= NF; ++i) print $i }' "$list" ;;
    *) echo "debian_packages: install or carry, not '$1'" >&2; return 2 ;;
  esac
}
