#!/usr/bin/env python3
"""The skip guard: fails a test run whose tests skipped although this machine has what they need.

CTest counts a skipped GoogleTest case as passed, so a broken import or a stale build could turn the
reference tests into silent skips. Every legitimate skip therefore starts its message with what it
needs, `GTEST_SKIP() << "[needs gloo] ..."` (tags: NEEDS below), and this script reads the JUnit XML
of a ctest run (`ctest --output-junit FILE`), prints the skips grouped by tag, and fails when

  - a test skipped for a need this machine satisfies (each tag's probe: Gloo headers or a Gloo
    build, bitsandbytes installed in the deps venv, the SmolLM2 file, SSE4.2, a CUDA device,
    llama-cpp-python, rsvg-convert, Chromium, Go);
  - a skip has no tag or an unknown one, or a test did not run (a failed fixture, a disabled test).

FERRY_ALLOW_SKIPS=tag,tag allows tags explicitly (printed in the summary). Only the tags that
skipped are probed, so a run without skips costs nothing. scripts/test.sh runs it after ctest.

Usage: skip_guard.py JUNIT_XML [--build DIR] [--python PY]
  --build   the build folder whose `ferry version` says whether Gloo is built in (default: the XML's
            folder's parent's parent, i.e. build/ for build/tests/junit.xml)
  --python  the deps venv's python, whose packages are probed (default: this python)
Exit 0: every skip allowed; 1: a skip or not-run test that is not; 2: bad arguments or XML.
"""
import argparse
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Callable

ALLOW_ENV = "FERRY_ALLOW_SKIPS"
TAG = re.compile(r"^\s*\[needs ([A-Za-z0-9_]+)\]")


@dataclasses.dataclass
class Machine:
    """What the probes look at."""
    build: pathlib.Path
    python: str
    deps: pathlib.Path = dataclasses.field(  # the deps cache, as scripts/deps.sh makes it
        default_factory=lambda: pathlib.Path(os.environ.get("FERRY_DEPS", pathlib.Path.home() / ".cache" / "ferry")))
    cpuinfo: pathlib.Path = pathlib.Path("/proc/cpuinfo")
    include_dirs: list = dataclasses.field(  # where CMakeLists.txt's find_path(gloo/algorithm.h) looks
        default_factory=lambda: ["/usr/include", "/usr/local/include", *os.environ.get("CPATH", "").split(":")])


def run(argv, timeout=60):
    """(exit code, stdout + stderr) of a command; 127 when it cannot start."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return done.returncode, (done.stdout + done.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)


def venv_runs(code):
    """A probe that is satisfied when CODE exits 0 under the deps venv's python."""
    def probe(m):
        rc, out = run([m.python, "-c", code])
        last = out.splitlines()[-1] if out else ""
        return rc == 0, f"{m.python}: {last or f'exit {rc}'}"
    return probe


def gloo(m):
    headers = [d for d in m.include_dirs if d and (pathlib.Path(d) / "gloo" / "algorithm.h").exists()]
    if headers:  # CMakeLists.txt's find_path would find them: the build should have Gloo
        return True, f"the Gloo headers are in {headers[0]}/gloo (re-run cmake if this build lacks them)"
    ferry = m.build / "ferry"
    rc, out = run([str(ferry), "version"]) if ferry.exists() else (127, f"no {ferry}")
    line = next((l for l in out.splitlines() if l.startswith("data parallelism:")), out[-200:])
    return "data parallelism: c10d Gloo" in out, f"no gloo/algorithm.h; `{ferry} version`: {line}"


def smollm2(m):
    # The file scripts/fetch-smollm2.sh fetches (and tests/parity/smollm2_gguf_ref.py reads).
    gguf = m.deps / "models" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    there = gguf.is_file() and gguf.stat().st_size > 0
    return there, f"{gguf} {'is there' if there else 'is not there'}"


def gemma3(m):
    # The file scripts/fetch-gemma3.sh joins (and tests/parity/gemma3_gguf_ref.py reads).
    gguf = m.deps / "models" / "gemma3" / "gemma-3-270m-q4_k_m.gguf"
    there = gguf.is_file() and gguf.stat().st_size > 0
    return there, f"{gguf} {'is there' if there else 'is not there'}"


def sse42(m):
    try:
        lines = m.cpuinfo.read_text().splitlines()
        flags = {word for line in lines if line.startswith("flags") for word in line.split()}
    except OSError as e:
        return False, f"cannot read {m.cpuinfo}: {e}"
    return "sse4_2" in flags, f"{m.cpuinfo} {'lists' if 'sse4_2' in flags else 'does not list'} sse4_2"


def rsvg_convert(m):
    found = shutil.which("rsvg-convert")
    return bool(found), f"rsvg-convert is {found}" if found else "no rsvg-convert on PATH"


def chromium(m):
    found = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    return bool(found), f"Chromium is {found}" if found else "no chromium on PATH"


def go(m):
    found = shutil.which("go")
    return bool(found), f"go is {found}" if found else "no go on PATH"


def gpu(m):
    if shutil.which("nvidia-smi"):
        rc, out = run(["nvidia-smi", "-L"])
        if rc == 0 and "GPU " in out:
            return True, f"nvidia-smi -L: {out.splitlines()[0]}"
    ok, said = venv_runs("import sys, torch; ok = torch.cuda.is_available(); "
                           "print(f'torch.cuda.is_available() = {ok}'); sys.exit(not ok)")(m)
    return ok, ("no GPU from nvidia-smi -L; " if shutil.which("nvidia-smi") else "no nvidia-smi; ") + said


@dataclasses.dataclass
class Need:
    needs: str  # what the tag stands for
    remedy: str  # how to satisfy it, so that the tests run
    probe: Callable[[Machine], tuple]  # (satisfied on this machine?, the evidence)


# Each tag a skip message may start with: what it needs, how to get it, and the probe that says
# whether this machine has it (change a probe here, e.g. if llama.cpp is reached another way).
NEEDS = {
    "gloo": Need("Gloo for data parallelism (its headers, or a Ferry built with it)",
                 "apt-get install libgloo-dev, re-run cmake", gloo),
    "bitsandbytes": Need("bitsandbytes in the deps venv", "scripts/deps.sh (requirements.txt pins it)", venv_runs(
        "import importlib.metadata as m; print('bitsandbytes', m.version('bitsandbytes'), 'installed')")),
    "smollm2": Need("the SmolLM2-135M-Instruct GGUF file", "scripts/fetch-smollm2.sh", smollm2),
    "gemma3": Need("the Gemma 3 270M GGUF file", "scripts/fetch-gemma3.sh", gemma3),
    "sse42": Need("a CPU with SSE4.2", "an x86-64 CPU with SSE4.2", sse42),
    "gpu": Need("a usable CUDA device", "a machine with an NVIDIA GPU (scripts/gpu-check.sh)", gpu),
    # `ferry report --png` rasterises its SVG charts with librsvg's rsvg-convert (cli/svg_to_png.h).
    "rsvg_convert": Need("rsvg-convert (librsvg)", "apt-get install librsvg2-bin (scripts/deps.sh installs it)", rsvg_convert),
    # tests/scripts/report_browser_test.py renders `ferry report`'s page in headless Chromium.
    "chromium": Need("Chromium (headless)", "apt-get install chromium (scripts/deps.sh installs it)", chromium),
    # tests/scripts/ollama_modelfile_test.py reads exported Modelfiles as Ollama does, in Go.
    "go": Need("Go (Debian's golang-go)", "apt-get install golang-go (scripts/deps.sh installs it)", go),
    # The GGUF export tests run llama.cpp through llama-cpp-python (tests/parity/gguf_llama_cpp_check.py).
    "llama_cpp": Need("llama.cpp (llama-cpp-python in the deps venv)", "scripts/deps.sh (scripts/requirements.txt pins llama-cpp-python; it compiles llama.cpp once into a cached wheel)",
                      venv_runs("import llama_cpp; print('import llama_cpp', llama_cpp.__version__)")),
}


@dataclasses.dataclass
class Skip:
    test: str
    message: str
    tag: str  # "" when the message has no [needs X]


def skip_message(output):
    """The message of a GoogleTest skip (the lines between `file:line: Skipped` and `[  SKIPPED ]`), or
    the whole output when there is no such block."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped"):
            message = []
            for text in lines[i + 1:]:
                if text.startswith("[  SKIPPED ]") or text.startswith("[       OK ]"):
                    break
                message.append(text)
            return "\n".join(message).strip()
    return output.strip()


def read_junit(path):
    """(number of tests, skips, tests that did not run with why) of a ctest JUnit file."""
    root = ET.parse(path).getroot()
    total, skips, not_run = 0, [], []
    for case in root.iter("testcase"):
        total += 1
        name, status = case.get("name", "?"), case.get("status", "")
        skipped = case.find("skipped")
        output = case.findtext("system-out") or ""
        why = skipped.get("message", "") if skipped is not None else ""
        if status == "disabled":
            not_run.append((name, "disabled (a DISABLED_ test or the DISABLED property): enable or delete it"))
        elif why == "SKIP_REGULAR_EXPRESSION_MATCHED" or why.startswith("SKIP_RETURN_CODE"):
            message = skip_message(output)
            found = TAG.match(message)
            skips.append(Skip(name, message, found.group(1) if found else ""))
        elif status == "notrun" or skipped is not None:
            not_run.append((name, f"{why or 'not run'}: {output.strip()}".strip(": ")))
    return total, skips, not_run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit")
    parser.add_argument("--build")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    junit = pathlib.Path(args.junit)
    try:
        total, skips, not_run = read_junit(junit)
    except (OSError, ET.ParseError) as e:
        print(f"skip guard: cannot read the ctest JUnit file {junit}: {e}", file=sys.stderr)
        return 2
    allowed_env = [t.strip() for t in os.environ.get(ALLOW_ENV, "").split(",") if t.strip()]
    unknown = [t for t in allowed_env if t not in NEEDS]
    if unknown:
        print(f"skip guard: {ALLOW_ENV} names unknown tags {', '.join(unknown)} (known: {', '.join(NEEDS)})",
              file=sys.stderr)
        return 2
    machine = Machine(build=pathlib.Path(args.build) if args.build else junit.resolve().parent.parent,
                      python=args.python)

    print(f"skip guard: {len(skips)} of {total} tests skipped, {len(not_run)} did not run ({junit})"
          + (f"; {ALLOW_ENV}={','.join(allowed_env)}" if allowed_env else ""))
    failures = 0
    by_tag = {}
    for skip in skips:
        by_tag.setdefault(skip.tag, []).append(skip)
    for tag in sorted(by_tag, key=lambda t: (t == "" or t not in NEEDS, t)):
        group = by_tag[tag]
        header = f"[needs {tag}]" if tag else "untagged"
        lines = []
        if tag in NEEDS:
            need = NEEDS[tag]
            satisfied, evidence = need.probe(machine)
            if not satisfied:
                verdict = f"allowed, this machine lacks {need.needs}"
                lines.append(f"to run them: {need.remedy}")
            elif tag in allowed_env:
                verdict = f"allowed by {ALLOW_ENV}={tag}, although this machine has {need.needs}"
            else:
                failures += 1
                verdict = f"FAIL, this machine has {need.needs}, so they should have run"
                lines.append(f"fix what skipped them, or allow it with {ALLOW_ENV}={tag}")
            lines.insert(0, f"found: {evidence}")
        else:
            failures += 1
            verdict = (f"FAIL, unknown tag (known: {', '.join(NEEDS)})" if tag else
                       "FAIL, a skip message must start with [needs X], X one of " + ", ".join(NEEDS))
        print(f"  {header} {len(group)} skipped: {verdict}")
        for line in lines:
            print(f"      {line}")
        for skip in group:
            first = skip.message.splitlines()[0] if skip.message else "(no message)"
            print(f"      - {skip.test}" + ("" if tag in NEEDS else f": {first}"))
    if not_run:
        failures += 1
        print(f"  did not run: {len(not_run)}: FAIL (ctest fails these too)")
        for name, why in not_run:
            print(f"      - {name}: {why.splitlines()[0] if why else ''}")
    print("skip guard: " + ("FAILED" if failures else "OK, every skip is allowed" if skips else "OK"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
