#!/usr/bin/env python3
"""Reads Ferry's TensorBoard event files back with the `tensorboard` package and checks them.

Used by metrics_tensorboard_parity_test.cpp: `python metrics_tensorboard_check.py EXPECTED.json`.
EXPECTED.json holds what the C++ test logged:
  {"logdir": "...", "event_files": 2, "wall_time_range": [lo, hi],
   "scalars": {"train/loss": [[step, value], ...], ...}}
Each value is compared as the float32 TensorBoard stores ("nan", "inf", "-inf" as strings). The scalars are what
TensorBoard shows after its own restart handling (SessionLog START purges stale steps). Exits with
status 3 and a message on the first mismatch (other failures, e.g. no tensorboard, give 1).
"""
import json
import math
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import event_pb2

MISMATCH = 3


def as_float32(value):
    """The float32 TensorBoard stores for an expected value; "nan", "inf", "-inf" spelled as strings."""
    value = float(value)
    if math.isinf(value) or math.isnan(value):
        return value
    return struct.unpack("<f", struct.pack("<f", value))[0]


def fail(message):
    print("metrics_tensorboard_check: FAIL: " + message, file=sys.stderr)
    sys.exit(MISMATCH)


def check_files(logdir, expected_count, wall_lo, wall_hi):
    names = sorted(n for n in os.listdir(logdir) if "tfevents" in n)
    if len(names) != expected_count:
        fail(f"expected {expected_count} event files in {logdir}, found {names}")
    for name in names:
        path = os.path.join(logdir, name)
        # tensorboard's record reader checks every record's length and data CRCs (DataLossError).
        # EventFileLoader would treat a bad record as the live end of the file and stop quietly.
        try:
            records = list(event_file_loader._make_tf_record_iterator(path))
        except Exception as e:  # tensorboard's DataLossError
            fail(f"{name}: {type(e).__name__}: {e}")
        events = [event_pb2.Event.FromString(r) for r in records]
        if not events:
            fail(f"{name}: no events")
        if events[0].file_version != "brain.Event:2":
            fail(f"{name}: first event has file_version {events[0].file_version!r}")
        for event in events:
            if not (wall_lo <= event.wall_time <= wall_hi):
                fail(f"{name}: wall_time {event.wall_time} outside [{wall_lo}, {wall_hi}]")
        print(f"{name}: {len(events)} events, checksums ok")


def check_scalars(logdir, expected):
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    if tags != sorted(expected):
        fail(f"scalar tags {tags} != expected {sorted(expected)}")
    for tag, rows in expected.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        if len(got) != len(rows):
            fail(f"{tag}: {len(got)} points {got}, expected {len(rows)} {rows}")
        for (step, value), (want_step, want_value) in zip(got, rows):
            if step != want_step:
                fail(f"{tag}: step {step} != expected {want_step}")
            want = as_float32(want_value)
            if math.isnan(want):
                if not math.isnan(value):
                    fail(f"{tag} step {step}: {value} != expected NaN")
            elif value != want:
                fail(f"{tag} step {step}: {value!r} != expected {as_float32(want_value)!r}")
        print(f"{tag}: {len(got)} points ok")


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    lo, hi = spec["wall_time_range"]
    check_files(spec["logdir"], spec["event_files"], lo, hi)
    check_scalars(spec["logdir"], spec["scalars"])
    print("metrics_tensorboard_check: OK")


if __name__ == "__main__":
    main()
