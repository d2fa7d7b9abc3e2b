#!/usr/bin/env python3
"""Parquet files and `datasets` folders for tests/parity/data_arrow_rows_parity_test.cpp, each with the
rows pyarrow itself reads from it (Table.to_pylist(), as JSON): the reference ArrowRows must equal.

Usage: data_arrow_rows_ref.py OUTDIR. Writes into OUTDIR:
  conversations.parquet   Dataset.to_parquet(batch_size=7): 16 row groups of chat rows (messages lists
                          of {role, content}, nulls, a 150 kB string, ints, floats, bools, unicode)
  saved/                  the same rows, Dataset.save_to_disk(num_shards=3): 3 Arrow stream shards
  hub/                    the same rows as the hub cache lays out a split: data/train-0000k-of-00002.parquet
  types.parquet, types.arrow (IPC stream), types_file.arrow (IPC file format)
                          pyarrow tables with large_string, large_list, dictionary-encoded strings,
                          fixed-size lists, maps, nested structs, a column of nulls, 8- to 64-bit ints
  unsupported.parquet     a string column beside timestamp and binary columns (values in row 1, nulls in row 2)
  temporal.parquet        timestamp (s, ms), date and decimal columns; temporal.json: its rows as pyarrow's cast
                          to string writes them
  mismatch/               two Parquet files whose columns differ
  dict/                   a DatasetDict (dataset_dict.json + train/ + test/)
  cases.json              per source: the expected rows, columns, and files (path in OUTDIR, rows)
"""
import json
import os
import pathlib
import random
import sys
import warnings

os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
warnings.filterwarnings("ignore")

import datasets  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.ipc as ipc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

datasets.disable_progress_bars()
datasets.logging.set_verbosity_error()


def chat_rows(n):
    rng = random.Random(7)
    words = ["hello", "world", "Grüße", "日本語", "🙂", "tab\there", "line\nbreak", 'quote"d', "back\\slash", ""]
    rows = []
    for i in range(n):
        turns = []
        for t in range(rng.randint(0, 4) if i != 5 else 3):
            content = " ".join(rng.choice(words) for _ in range(rng.randint(0, 6)))
            if i == 5 and t == 1:
                content = "long " * 30000  # 150 kB
            if i % 11 == 3 and t == 0:
                content = None  # a null inside a struct inside a list
            turns.append({"role": "user" if t % 2 == 0 else "assistant", "content": content})
        rows.append({
            "id": i,
            "messages": turns if i % 13 != 4 else None,  # a null list
            "score": None if i % 5 == 2 else round(rng.uniform(-3, 3), 6) + 1e-9 * i,
            "ok": i % 3 == 0,
            "tag": None if i % 7 == 0 else rng.choice(["a", "bb", "ccc"]),
            "big": (1 << 62) + i if i % 2 else -(1 << 62) - i,
        })
    return rows


def expected_rows(table):
    return json.loads(json.dumps(table.to_pylist(), ensure_ascii=False))


def stream_table(path):
    with pa.memory_map(str(path)) as source:
        return ipc.open_stream(source).read_all()


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    cases = {}
    features = datasets.Features({
        "id": datasets.Value("int64"),
        "messages": datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")}),
        "score": datasets.Value("float64"),
        "ok": datasets.Value("bool"),
        "tag": datasets.Value("string"),
        "big": datasets.Value("int64"),
    })
    rows = chat_rows(110)
    assert max(len(m["content"] or "") for r in rows for m in r["messages"] or []) > 100_000
    ds = datasets.Dataset.from_list(rows, features=features)

    # One Parquet file of many row groups.
    ds.to_parquet(str(out / "conversations.parquet"), batch_size=7)
    groups = pq.ParquetFile(out / "conversations.parquet").metadata.num_row_groups
    assert groups >= 10, groups
    table = pq.read_table(out / "conversations.parquet")
    cases["conversations.parquet"] = {"rows": expected_rows(table), "columns": table.schema.names,
                                      "files": [["conversations.parquet", table.num_rows]]}

    # save_to_disk: shards in state.json's order.
    ds.save_to_disk(str(out / "saved"), num_shards=3)
    state = json.loads((out / "saved" / "state.json").read_text())
    shards = [f["filename"] for f in state["_data_files"]]
    assert len(shards) == 3, shards
    tables = [stream_table(out / "saved" / s) for s in shards]
    cases["saved"] = {"rows": expected_rows(pa.concat_tables(tables)), "columns": tables[0].schema.names,
                      "files": [["saved/" + s, t.num_rows] for s, t in zip(shards, tables)]}

    # The hub cache's layout of a split in two files (read back sorted by name).
    (out / "hub" / "data").mkdir(parents=True, exist_ok=True)
    hub_files = []
    for k in range(2):
        name = f"data/train-{k:05d}-of-00002.parquet"
        ds.shard(2, k, contiguous=True).to_parquet(str(out / "hub" / name), batch_size=20)
        hub_files.append(name)
    hub_tables = [pq.read_table(out / "hub" / f) for f in hub_files]
    cases["hub"] = {"rows": expected_rows(pa.concat_tables(hub_tables)), "columns": hub_tables[0].schema.names,
                    "files": [["hub/" + f, t.num_rows] for f, t in zip(hub_files, hub_tables)]}

    # Arrow types datasets does not write by default.
    n = 40
    rng = random.Random(11)
    strings = [None if i % 9 == 4 else f"s{i}-{'é' * (i % 4)}" for i in range(n)]
    types = pa.table({
        "large_text": pa.array(strings, type=pa.large_string()),
        "large_list": pa.array([[rng.randint(-5, 5) for _ in range(i % 4)] for i in range(n)],
                               type=pa.large_list(pa.int32())),
        "category": pa.array([rng.choice(["red", "green", None, "blue"]) for _ in range(n)]).dictionary_encode(),
        "pair": pa.array([[i, -i] for i in range(n)], type=pa.list_(pa.int16(), 2)),
        "attrs": pa.array([[("k", i), ("z", None)] if i % 3 else [] for i in range(n)],
                          type=pa.map_(pa.string(), pa.int64())),
        "nested": pa.array([{"a": {"b": [i, None], "c": None if i % 2 else "x"}, "d": float(i) / 8} for i in range(n)]),
        "nothing": pa.nulls(n),
        "i8": pa.array([(-1) ** i * (i % 128) for i in range(n)], type=pa.int8()),
        "u64": pa.array([(1 << 64) - 1 - i for i in range(n)], type=pa.uint64()),
        "f32": pa.array([i / 3 for i in range(n)], type=pa.float32()),
        "flag": pa.array([None if i % 4 == 1 else bool(i % 2) for i in range(n)]),
    })
    pq.write_table(types, out / "types.parquet", row_group_size=9)
    with ipc.new_stream(str(out / "types.arrow"), types.schema) as writer:
        for batch in types.to_batches(max_chunksize=13):
            writer.write_batch(batch)
    with ipc.new_file(str(out / "types_file.arrow"), types.schema) as writer:
        for batch in types.to_batches(max_chunksize=13):
            writer.write_batch(batch)
    for name in ("types.parquet", "types.arrow", "types_file.arrow"):
        read = pq.read_table(out / name) if name.endswith(".parquet") else (
            stream_table(out / name) if name == "types.arrow" else ipc.open_file(str(out / name)).read_all())
        cases[name] = {"rows": expected_rows(read), "columns": read.schema.names, "files": [[name, read.num_rows]]}
    assert pq.read_table(out / "types.parquet").schema.field("category").type.id == pa.dictionary(pa.int32(), pa.string()).id

    # Columns the loaders cannot use.
    pq.write_table(pa.table({
        "text": ["a", "b", "c"],
        "when": pa.array([1_700_000_000, None, 5], type=pa.timestamp("s")),
        "blob": pa.array([b"\x00\x01", None, b"x"], type=pa.binary()),
    }), out / "unsupported.parquet")

    # Temporal and decimal columns: expected as pyarrow's cast to string writes them.
    import decimal
    import pyarrow.compute as pc
    temporal = pa.table({
        "text": ["a", "b", "c"],
        "when": pa.array([1_700_000_000, None, 5], type=pa.timestamp("s")),
        "when_ms": pa.array([1_700_000_000_123, 0, None], type=pa.timestamp("ms")),
        "day": pa.array([19_000, None, 0], type=pa.date32()),
        "price": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50")], type=pa.decimal128(6, 2)),
    })
    pq.write_table(temporal, out / "temporal.parquet")
    read_back = pq.read_table(out / "temporal.parquet")  # Parquet stores seconds as milliseconds
    as_text = pa.table({name: (pc.cast(col, pa.string()) if name != "text" else col)
                        for name, col in zip(read_back.column_names, read_back.columns)})
    (out / "temporal.json").write_text(json.dumps(as_text.to_pylist()))

    # Two files whose columns differ.
    (out / "mismatch").mkdir(exist_ok=True)
    pq.write_table(pa.table({"prompt": ["p"], "completion": ["c"]}), out / "mismatch" / "a.parquet")
    pq.write_table(pa.table({"prompt": ["p"], "answer": ["c"]}), out / "mismatch" / "b.parquet")

    datasets.DatasetDict({"train": ds.select(range(5)), "test": ds.select(range(5, 8))}).save_to_disk(str(out / "dict"))

    (out / "cases.json").write_text(json.dumps(cases, ensure_ascii=False))
    print(f"data_arrow_rows: {len(cases)} sources, {groups} row groups in conversations.parquet, "
          f"shards {[t.num_rows for t in tables]}")


if __name__ == "__main__":
    main()
