#!/usr/bin/env bash
# Rows per second read from a Parquet file of short conversations (default 100,000 rows, written by
# `datasets`' Dataset.to_parquet, row groups of its default size) and from the same rows saved with
# save_to_disk (3 shards): Ferry's ArrowRows (tests/bench/data_arrow_rows_bench.cpp, every row in order
# to JSON, then 1000 rows in random order) against pyarrow's own Table.to_pylist() (read + convert,
# the whole table at once) in the same run. Random order is also measured on the rows written in
# row groups of 1000 (a group decoded per jump).
#
#   scripts/bench-arrow-rows.sh [ROWS] [BUILD_DIR]
source "$(dirname "${BASH_SOURCE[0]}")/lib/help.sh" "$@"  # -h, --help: print the comment above and exit
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rows="${1:-100000}"
build="${2:-$here/build}"
python="${FERRY_PYTHON:-${FERRY_DEPS:-$HOME/.cache/ferry}/venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --build "$build" --target data_arrow_rows_bench -j "${FERRY_JOBS:-2}" > "$work/build.log" 2>&1 ||
  { cat "$work/build.log"; exit 1; }
HF_DATASETS_DISABLE_PROGRESS_BARS=1 "$python" - "$work" "$rows" <<'PY'
import random, sys, time
import datasets, pyarrow as pa, pyarrow.ipc as ipc, pyarrow.parquet as pq
work, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
def row(i):
    a, b = rng.randrange(100), rng.randrange(100)
    return {"messages": [{"role": "system", "content": "You add numbers."},
                         {"role": "user", "content": f"What is {a} plus {b}?"},
                         {"role": "assistant", "content": f"{a} plus {b} is {a + b}."}],
            "id": i, "score": rng.random()}
ds = datasets.Dataset.from_list([row(i) for i in range(n)])
ds.to_parquet(f"{work}/conversations.parquet")
ds.to_parquet(f"{work}/groups_of_1000.parquet", batch_size=1000)  # for random access: 100 row groups
ds.save_to_disk(f"{work}/saved", num_shards=3)
meta = pq.ParquetFile(f"{work}/conversations.parquet").metadata
print(f"== {n} rows, {meta.num_row_groups} row groups, "
      f"{meta.serialized_size + sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)) // 1024} KiB")
best = None
for _ in range(3):
    start = time.perf_counter()
    out = pq.read_table(f"{work}/conversations.parquet").to_pylist()
    s = time.perf_counter() - start
    best = s if best is None else min(best, s)
print(f"RESULT pyarrow_to_pylist_rows_per_s {n / best:.0f} ({best:.3f} s, best of 3, parquet)")
best = None
for _ in range(3):
    start = time.perf_counter()
    out = []
    for k in range(3):
        with pa.memory_map(f"{work}/saved/data-{k:05d}-of-00003.arrow") as source:
            out += ipc.open_stream(source).read_all().to_pylist()
    s = time.perf_counter() - start
    best = s if best is None else min(best, s)
print(f"RESULT pyarrow_to_pylist_saved_rows_per_s {n / best:.0f} ({best:.3f} s, best of 3, save_to_disk shards)")
PY
echo "== ArrowRows, Parquet file"
"$build/tests/bench/data_arrow_rows_bench" "$work/conversations.parquet"
echo "== ArrowRows, Parquet file in row groups of 1000 rows"
"$build/tests/bench/data_arrow_rows_bench" "$work/groups_of_1000.parquet"
echo "== ArrowRows, save_to_disk folder"
"$build/tests/bench/data_arrow_rows_bench" "$work/saved"
