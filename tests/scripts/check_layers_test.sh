#!/usr/bin/env bash
# scripts/check-layers.sh must pass on this checkout and fail, naming the file and line, on a tree
# with an include from a floor above or from a peer room, and on a floor table naming a missing folder.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
check=$here/scripts/check-layers.sh
fail() { echo "FAIL: $*" >&2; exit 1; }

"$check" > /dev/null || fail "the checkout itself has upward includes"

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/docs" "$tree/core" "$tree/src/a" "$tree/src/b" "$tree/top"
cat > "$tree/docs/architecture.md" <<'MD'
<!-- floors -->
```
floor  rooms
top    top
src    src/a src/b
core   core
```
MD
echo '#include "core/base.h"' > "$tree/src/a/a.h"
echo '// nothing' > "$tree/core/base.h"
echo '#include "src/a/a.h"' > "$tree/top/t.cpp"
"$check" --root "$tree" > /dev/null || fail "a tree with only downward includes was refused"

printf '// base\n#include "top/t.h"\n' > "$tree/core/base.h"
out=$("$check" --root "$tree" 2>&1) && fail "an include from a floor above passed"
grep -q 'core/base.h:2: includes top/t.h, from room top/, above' <<<"$out" || fail "upward include not named: $out"

echo '// base' > "$tree/core/base.h"
echo '#include "src/a/a.h"' > "$tree/src/b/b.cpp"
out=$("$check" --root "$tree" 2>&1) && fail "an include from a peer room passed"
grep -q 'src/b/b.cpp:1: includes src/a/a.h, from room src/a/, a peer of' <<<"$out" || fail "peer include not named: $out"

rm "$tree/src/b/b.cpp"
sed -i 's#^core   core#core   core gone#' "$tree/docs/architecture.md"
out=$("$check" --root "$tree" 2>&1) && fail "a table naming a missing folder passed"
grep -q 'names gone/, which does not exist' <<<"$out" || fail "missing folder not named: $out"
echo "check-layers: all cases behave"
