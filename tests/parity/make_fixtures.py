#!/usr/bin/env python3
"""Runs tests/parity/*_ref.py reference scripts (all, or those named) with OUTDIR/<stem> as argument.

Usage: make_fixtures.py OUTDIR [STEM ...]

Each script writes what the C++ parity tests compare against (tensors as safetensors, ids as json)
into OUTDIR/<script name without _ref.py>/. A script that fails fails the `parity_fixtures` test,
and CTest then skips the parity tests that need it.
"""
import pathlib
import subprocess
import sys


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    here = pathlib.Path(__file__).resolve().parent
    failed = []
    wanted = set(sys.argv[2:])
    for script in sorted(here.glob("*_ref.py")):
        if wanted and script.name[: -len("_ref.py")] not in wanted:
            continue
        target = out / script.name[: -len("_ref.py")]
        target.mkdir(parents=True, exist_ok=True)
        print(f"parity fixtures: {script.name} -> {target}", flush=True)
        if subprocess.run([sys.executable, str(script), str(target)]).returncode != 0:
            failed.append(script.name)
    if failed:
        print("parity fixtures: FAILED: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
