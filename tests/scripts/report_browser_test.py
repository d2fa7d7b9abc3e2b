#!/usr/bin/env python3
"""`ferry report` in a real browser: the demo pipeline's page rendered by headless Chromium.

  1. Runs the demo pipeline (configs/demo.yaml: SFT -> RM -> PPO) for a few steps from a scratch
     folder (configs/ and data/ linked to this checkout; the eval files cut to their first rows so
     the before/after evaluations take no time), then `ferry report runs/demo`.
  2. Proves that this Chromium reports page problems on stderr: a canary page with a malformed SVG
     attribute and a console.error must produce CONSOLE lines (else the check below would be blind).
  3. Renders the report with Chromium (--dump-dom, logging on stderr, no network): no CONSOLE line
     at all (the page has no scripts, so any console message is Chromium reporting a problem with
     the page), and in the DOM Chromium built: one section per stage, every chart with at least one
     polyline, every logged key of each stage's metrics.jsonl drawn in that stage's section, every
     polyline point equal to metrics.jsonl's value (step and value read back through the chart's
     own tick labels, to 0.02 px), and a dot on every point of the short series.
  4. Takes a screenshot (--screenshot) and checks it is the window's size and that the charts were
     painted (pixels of the first series' colour).

The screenshot, the DOM, the page and Chromium's log are kept as artifacts in
$FERRY_ARTIFACTS/report-browser/ when FERRY_ARTIFACTS is set, else in --artifacts DIR (CTest passes
build/tests/artifacts/report-browser). `--docs-image PATH` also writes the top of the screenshot,
scaled down, to PATH (docs/images/report-demo-pipeline.png was made with
`--steps 40 --docs-image docs/images/report-demo-pipeline.png`).

Chromium: Debian's `chromium` (scripts/debian-packages.txt lists it, so scripts/deps.sh installs
it); where it is missing and this runs as root with apt-get, the test installs it. Without it the
test skips with `[needs chromium]` (exit 77; scripts/skip_guard.py fails a run that skipped on a
machine that has it).

Usage: report_browser_test.py --ferry BUILD/ferry --source SOURCE_DIR --artifacts DIR
                              [--steps N] [--docs-image PATH]
"""
import argparse
import html.parser
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
CHROMIUM_NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
WINDOW = (1400, 9000)  # wide enough for two charts per row; tall enough for the whole demo page
EVAL_ROWS = 32  # rows kept of each data/*eval*.jsonl
FIRST_SERIES_RGB = (0x1f, 0x77, 0xb4)  # svg_chart.cpp's first colour


def fail(message):
    print(f"report_browser_test: FAIL: {message}", file=sys.stderr)
    raise SystemExit(1)


def find_chromium():
    """The browser's path, installing Debian's `chromium` when missing and allowed; None without."""
    for name in CHROMIUM_NAMES:
        if shutil.which(name):
            return shutil.which(name)
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]
        for command in (install, ["apt-get", "update", "-qq"], install):
            subprocess.run(command, env=env, capture_output=True, timeout=600)
            if shutil.which("chromium"):
                print("report_browser_test: installed Debian's chromium (apt-get install chromium)", file=sys.stderr)
                return shutil.which("chromium")
    return None


def run(argv, cwd, timeout):
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


def run_pipeline(ferry, source, scratch, steps):
    """Runs the demo pipeline in `scratch` and `ferry report runs/demo`; returns the report's path."""
    (scratch / "configs").symlink_to(source / "configs")
    data = scratch / "data"
    data.mkdir()
    for item in sorted((source / "data").iterdir()):
        if "eval" in item.name and item.suffix == ".jsonl":
            with item.open() as f:
                (data / item.name).write_text("".join(line for _, line in zip(range(EVAL_ROWS), f)))
        else:
            (data / item.name).symlink_to(item)
    overrides = ["train.device=cpu", "logging.progress=never", "logging.tensorboard=false",
                 f"train.max_steps={steps}", "train.micro_batch_size=4", "data.max_samples=64",
                 f"train.eval_every={max(1, steps // 4)}", "train.save_every=0", "train.warmup_steps=1",
                 "ppo.rollout_batch_size=4", "ppo.ppo_epochs=1", "generation.max_new_tokens=8"]
    argv = [str(ferry), "pipeline", "--config", "configs/demo.yaml"]
    for o in overrides:
        argv += ["--set", o]
    done, seconds = run(argv, scratch, 600)
    if done.returncode != 0:
        fail(f"ferry pipeline exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    print(f"pipeline: {steps} steps per stage in {seconds:.1f} s")
    if "\nreport: runs/demo/report.html" not in done.stdout:
        fail(f"ferry pipeline did not print its report's path:\n{done.stdout[-2000:]}")
    done, _ = run([str(ferry), "report", "runs/demo"], scratch, 120)
    said = re.search(r"^report: (\S+) \(.*, (\d+) charts\)$", done.stdout, re.M)
    if done.returncode != 0 or not said:
        fail(f"ferry report runs/demo exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return scratch / said.group(1), int(said.group(2))


def chromium_argv(chromium, profile, *extra):
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile}",
            "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing reaches the network
            "--enable-logging=stderr", "--v=0", f"--window-size={WINDOW[0]},{WINDOW[1]}", *extra]


def console_lines(log):
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def check_console_is_seen(chromium, scratch):
    """A canary page: Chromium must log its problems as CONSOLE lines on stderr."""
    canary = scratch / "canary.html"
    canary.write_text('<!DOCTYPE html><html><body><svg width="10" height="10"><polyline points="1,2 3,x"/></svg>'
                      '<script>console.error("canary console error")</script></body></html>')
    done, _ = run(chromium_argv(chromium, scratch / "profile", "--dump-dom", canary.as_uri()), scratch, 120)
    seen = console_lines(done.stderr)
    if not any("polyline" in line for line in seen) or not any("canary console error" in line for line in seen):
        fail(f"Chromium did not report the canary page's problems as CONSOLE lines on stderr, so the report's "
             f"console cannot be checked this way (exit {done.returncode}); its stderr:\n{done.stderr[-3000:]}")


class ReportDom(html.parser.HTMLParser):
    """The sections, charts, ticks, polylines and dots of the DOM Chromium dumped."""

    def __init__(self):
        super().__init__()
        self.sections = []  # [{"id", "heading", "charts": [chart]}]
        self.chart = None
        self.tick = None  # (kind, {"at": pixel, "label": text}) while inside a <g class="xtick|ytick">
        self.in_h2 = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.sections.append({"id": a.get("id", ""), "heading": "", "charts": []})
        elif tag == "h2" and self.sections:
            self.in_h2 = True
        elif tag == "figure" and "data-chart" in a:
            self.chart = {"id": a["data-chart"], "xtick": [], "ytick": [], "polylines": [], "circles": []}
            if not self.sections:
                fail(f"chart {a['data-chart']} outside any <section>")
            self.sections[-1]["charts"].append(self.chart)
        elif self.chart is None:
            return
        elif tag == "g" and a.get("class") in ("xtick", "ytick"):
            self.tick = (a["class"], {"at": None, "label": ""})
        elif tag == "line" and self.tick:
            self.tick[1]["at"] = float(a["x1" if self.tick[0] == "xtick" else "y1"])
        elif tag == "polyline":
            points = [tuple(map(float, p.split(","))) for p in a.get("points", "").split()]
            self.chart["polylines"].append((a.get("data-series", ""), points))
        elif tag == "circle":
            self.chart["circles"].append((float(a["cx"]), float(a["cy"])))

    def handle_endtag(self, tag):
        if tag == "figure":
            self.chart = None
        elif tag == "g" and self.tick:
            self.chart[self.tick[0]].append(self.tick[1])
            self.tick = None
        elif tag == "h2":
            self.in_h2 = False

    def handle_data(self, data):
        if self.tick:
            self.tick[1]["label"] += data
        elif self.in_h2:
            self.sections[-1]["heading"] += data


class Axis:
    """Pixel -> value from the first and last labelled tick, as a person reads the chart."""

    def __init__(self, ticks, where):
        if len(ticks) < 2:
            fail(f"{where}: fewer than two labelled ticks")
        first, last = ticks[0], ticks[-1]
        self.p0, self.v0 = first["at"], float(first["label"])
        self.p1, self.v1 = last["at"], float(last["label"])

    def value(self, pixel):
        return self.v0 + (pixel - self.p0) * (self.v1 - self.v0) / (self.p1 - self.p0)

    def per_pixel(self):
        return abs((self.v1 - self.v0) / (self.p1 - self.p0))


def logged_values(metrics):
    """{key: [(step, value)]}: metrics.jsonl's finite numbers per key, in file order."""
    values = {}
    for n, line in enumerate(metrics.read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                values.setdefault(key, []).append((row["step"], float(value)))
    return values


def check_section(section, metrics):
    """Every chart has points, every logged key is drawn, every point is the logged one."""
    name = section["heading"]
    logged = logged_values(metrics)
    drawn = {}
    points_checked = 0
    if not section["charts"]:
        fail(f"section {name!r} has no chart")
    for chart in section["charts"]:
        where = f"{name}: chart {chart['id']}"
        lines = [(key, pts) for key, pts in chart["polylines"] if pts]
        if not lines:
            fail(f"{where}: no polyline with points")
        x, y = Axis(chart["xtick"], where + " x axis"), Axis(chart["ytick"], where + " y axis")
        dots = set(chart["circles"])
        for key, pts in lines:
            if key not in logged:
                fail(f"{where}: series {key!r} is drawn but {metrics} logs no finite value of it")
            expected = logged[key]
            for px, py in pts:
                step, value = x.value(px), y.value(py)
                i = len(drawn.setdefault(key, []))
                drawn[key].append(step)
                if i >= len(expected):
                    fail(f"{where}: {key} has more drawn points than the {len(expected)} logged")
                want_step, want_value = expected[i]
                if abs(step - want_step) > 0.02 * x.per_pixel():
                    fail(f"{where}: {key} point {i} is at step {step:.4f}, metrics.jsonl logs step {want_step}")
                if abs(value - want_value) > 0.02 * y.per_pixel():
                    fail(f"{where}: {key} point {i} (step {want_step}) reads {value:.6g}, metrics.jsonl says "
                         f"{want_value:.6g} (tolerance {0.02 * y.per_pixel():.3g})")
                if len(expected) <= 40 and (px, py) not in dots:
                    fail(f"{where}: {key} point {i} has no dot")
                points_checked += 1
    for key, expected in logged.items():
        if len(drawn.get(key, [])) != len(expected):
            fail(f"{name}: {key} has {len(expected)} finite values in {metrics} but {len(drawn.get(key, []))} drawn points")
    return points_checked


def check_screenshot(path):
    from PIL import Image  # Pillow: in the deps venv (tensorboard needs it)
    with Image.open(path) as image:
        if image.size != WINDOW:
            fail(f"{path} is {image.size[0]}x{image.size[1]}, the window was {WINDOW[0]}x{WINDOW[1]}")
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=WINDOW[0] * WINDOW[1])  # [(count, (r, g, b))]
    painted = sum(n for n, p in colours if all(abs(c - w) <= 12 for c, w in zip(p, FIRST_SERIES_RGB)))
    if painted < 2000:
        fail(f"{path}: only {painted} pixels of the first series' colour: the charts were not painted")
    return painted


def write_docs_image(screenshot, target):
    """The top of the page (the summary and the first stages' charts) at 60%, in a small palette."""
    from PIL import Image
    with Image.open(screenshot) as image:
        top = image.convert("RGB").crop((0, 0, 1380, 2100))
        small = top.resize((top.width * 3 // 5, top.height * 3 // 5), Image.LANCZOS)
        small.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)
    print(f"docs image: {target} ({target.stat().st_size // 1024} KiB)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ferry", required=True, type=pathlib.Path)
    parser.add_argument("--source", required=True, type=pathlib.Path)
    parser.add_argument("--artifacts", required=True, type=pathlib.Path)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--docs-image", type=pathlib.Path)
    args = parser.parse_args()
    artifacts = pathlib.Path(os.environ["FERRY_ARTIFACTS"]) / "report-browser" if os.environ.get(
        "FERRY_ARTIFACTS") else args.artifacts
    chromium = find_chromium()
    if not chromium:
        print("[needs chromium] headless Chromium renders the report: apt-get install chromium "
              "(scripts/deps.sh installs it)")
        return SKIP
    started = time.monotonic()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="report_browser_"))
    report, charts = run_pipeline(args.ferry.resolve(), args.source.resolve(), scratch, args.steps)
    check_console_is_seen(chromium, scratch)

    artifacts.mkdir(parents=True, exist_ok=True)
    done, seconds = run(chromium_argv(chromium, scratch / "profile", "--dump-dom", report.as_uri()), scratch, 120)
    (artifacts / "report.dom.html").write_text(done.stdout)
    (artifacts / "chromium.log").write_text(done.stderr)
    shutil.copy(report, artifacts / "report.html")
    if done.returncode != 0 or "</html>" not in done.stdout:
        fail(f"chromium --dump-dom exited {done.returncode}; log in {artifacts / 'chromium.log'}")
    console = console_lines(done.stderr)
    if console:
        fail("the page logged console messages in Chromium:\n" + "\n".join(console))
    dom = ReportDom()
    dom.feed(done.stdout)
    pipeline = json.loads((report.parent / "pipeline.json").read_text())
    stages = pipeline["stages"]
    sections = [s for s in dom.sections if s["id"].startswith("run-")]
    if len(sections) != len(stages):
        fail(f"{len(sections)} stage sections in the DOM, pipeline.json lists {len(stages)} stages")
    drawn_charts = sum(len(s["charts"]) for s in sections)
    if drawn_charts != charts:
        fail(f"the DOM holds {drawn_charts} charts, ferry report said {charts}")
    points = sum(check_section(s, report.parent / stage["folder"] / "metrics.jsonl")
                 for s, stage in zip(sections, stages))
    print(f"chromium --dump-dom: {drawn_charts} charts in {len(sections)} sections, {points} points equal to "
          f"metrics.jsonl, no console message ({seconds:.1f} s)")

    screenshot = artifacts / "report-demo-pipeline.png"
    screenshot.unlink(missing_ok=True)
    done, seconds = run(chromium_argv(chromium, scratch / "profile", f"--screenshot={screenshot}", report.as_uri()),
                        scratch, 120)
    if done.returncode != 0 or not screenshot.exists():
        fail(f"chromium --screenshot exited {done.returncode} without {screenshot}:\n{done.stderr[-3000:]}")
    painted = check_screenshot(screenshot)
    print(f"screenshot: {screenshot} ({WINDOW[0]}x{WINDOW[1]}, {painted} pixels of the first series' colour; "
          f"{seconds:.1f} s)")
    if args.docs_image:
        write_docs_image(screenshot, args.docs_image)
    shutil.rmtree(scratch)
    print(f"report_browser_test: ok in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
