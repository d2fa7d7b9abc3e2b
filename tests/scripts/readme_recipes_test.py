#!/usr/bin/env python3
"""Runs the recipes of README.md as written, so the README's commands cannot drift from the code.

README.md marks each recipe's command block with `<!-- recipe: NAME -->` and each example data
line with `<!-- data: FILE -->` (the fenced block right after the marker). This test:

  - writes each data file into a scratch folder: the README's example line, repeated;
  - makes a tiny model (`ferry train-sft` for one step from a 2-layer config with the demo
    tokenizer, plus a Jinja chat template) and puts it wherever a recipe's `MODEL=` line points:
    a Hugging Face folder for a path, a GGUF file (`ferry export --format gguf`) for a `.gguf`
    path, a snapshot in a scratch hub cache ($HOME/.cache/huggingface/hub) for `ORG/NAME`, and an
    entry of a scratch Ollama store ($HOME/.ollama/models) for `ollama:NAME[:TAG]`;
  - runs every recipe block with bash (-e: any failing command fails the test) from the scratch
    folder, with HOME pointing inside it, `build/ferry` and `configs/` linked to this checkout.
    Only three things change from the README's text: `ferry train-*` and `ferry pipeline` lines
    get a few `--set` overrides appended (2 steps, small batches, short rows and answers),
    `ferry generate` lines get `--max-new-tokens 8`, and `ollama` lines are left out (no Ollama
    here); a Modelfile the recipe wrote (in any folder) must name GGUF files that exist.

A README edit that drops a marker fails the test (the recipes it expects are listed below).
The scratch folder is removed on success, kept on failure (and with FERRY_KEEP_TEST_FILES=1).

Usage: readme_recipes_test.py --ferry BUILD/ferry --source SOURCE_DIR
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

EXPECTED_RECIPES = ["config-show", "sft-gguf", "grpo-command", "rlhf-pipeline"]
DATA_REPEATS = 32  # enough rows for the starters' eval_fraction to hold one out

TRAIN_OVERRIDES = [
    "train.max_steps=2", "train.micro_batch_size=2", "train.grad_accumulation=1",
    "data.max_length=128", "train.save_every=0", "train.eval_every=0",
    "generation.max_new_tokens=8", "grpo.num_generations=2", "grpo.generation_batch_size=4",
    "ppo.rollout_batch_size=2",
]

# The demo tokenizer's turn format (configs/templates/demo.yaml) as a model folder's own Jinja
# template, so the recipes' `tokenizer.chat_template: auto` has one to find.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + '<|end|>' }}"
    "{% if not loop.last or add_generation_prompt %}{{ '\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}")


def fail(message):
    print(f"readme_recipes_test: FAIL: {message}", file=sys.stderr)
    raise SystemExit(1)


def marked_blocks(readme_text, kind):
    """{name: block text} for every `<!-- KIND: NAME -->` followed by a fenced block."""
    pattern = re.compile(r"<!--\s*" + kind + r":\s*(\S+)\s*-->\s*\n```[a-z]*\n(.*?)\n```", re.S)
    blocks = {}
    for match in pattern.finditer(readme_text):
        name, body = match.group(1), match.group(2)
        if name in blocks:
            fail(f"README.md marks two blocks `{kind}: {name}`")
        blocks[name] = body
    return blocks


def logical_commands(block):
    """The block's lines joined where a line ends in a backslash: [(first line index, text)]."""
    commands, current, start = [], [], 0
    for i, line in enumerate(block.split("\n")):
        if not current:
            start = i
        current.append(line)
        if not line.rstrip().endswith("\\"):
            commands.append((start, "\n".join(current)))
            current = []
    if current:
        commands.append((start, "\n".join(current)))
    return commands


def adapt(block):
    """The block as the test runs it, and the `ollama` commands it left out."""
    out, skipped = [], []
    heredoc_end = None
    for _, command in logical_commands(block):
        first = command.lstrip()
        if heredoc_end is not None:  # a here-document's body passes unchanged
            out.append(command)
            if command.strip() == heredoc_end:
                heredoc_end = None
            continue
        here = re.search(r"<<-?\s*'?\"?(\w+)'?\"?", command)
        if here:
            heredoc_end = here.group(1)
        if re.match(r"ollama\s", first):
            skipped.append(command)
            out.append("# (left out by the test: no Ollama here) " + command.replace("\n", " "))
            continue
        code, _, comment = command.partition(" #") if "\n" not in command else (command, "", "")
        code = code.rstrip()
        if re.match(r"build/ferry (train-[a-z]+|pipeline)\b", first):
            code += "".join(f" --set {override}" for override in TRAIN_OVERRIDES)
        elif re.match(r"build/ferry generate\b", first):
            code += " --max-new-tokens 8"
        out.append(code + (" #" + comment if comment else ""))
    return "\n".join(out), skipped


def run(args, cwd, env, what, timeout=120):
    started = time.monotonic()
    result = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=timeout)
    if result.returncode != 0:
        fail(f"{what} exited {result.returncode}:\n{result.stdout[-6000:]}")
    return result.stdout, time.monotonic() - started


def make_tiny_model(ferry, source, scratch, env):
    """A 2-layer Llama folder with the demo tokenizer and a Jinja chat template, and its GGUF."""
    config = json.loads((source / "configs" / "demo-model.json").read_text())
    config.update(num_hidden_layers=2, max_position_embeddings=2048)
    (scratch / "tiny-model.json").write_text(json.dumps(config, indent=2))
    (scratch / "tiny-model.yaml").write_text(
        "stage: sft\n"
        f"model: {{config: {scratch / 'tiny-model.json'}}}\n"
        f"tokenizer: {{path: {source / 'data' / 'tokenizer.model'}, chat_template: demo}}\n"
        f"data: {{train_file: {source / 'data' / 'sft_eval.jsonl'}, max_length: 64, max_samples: 8}}\n"
        "train: {max_steps: 1, micro_batch_size: 2, device: cpu}\n"
        f"output: {{dir: {scratch / 'tiny-run'}}}\n")
    run([ferry, "train-sft", "--config", str(scratch / "tiny-model.yaml")], scratch, env, "making the tiny model")
    folder = scratch / "tiny-run" / "final"
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    gguf = scratch / "tiny-model.gguf"
    run([ferry, "export", "--checkpoint", str(folder), "--format", "gguf", "--output", str(gguf)], scratch, env,
        "exporting the tiny model to GGUF")
    return folder, gguf


def place_model(value, home, folder, gguf):
    """Puts the tiny model where a recipe's MODEL= value points (in the scratch HOME)."""
    if value.startswith("ollama:"):
        name, _, tag = value[len("ollama:"):].partition(":")
        store = home / ".ollama" / "models"
        digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
        (store / "blobs").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(gguf, store / "blobs" / f"sha256-{digest}")
        namespace, _, model = name.rpartition("/")
        manifest = store / "manifests" / "registry.ollama.ai" / (namespace or "library") / model / (tag or "latest")
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(json.dumps({"schemaVersion": 2, "layers": [{
            "mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}",
            "size": gguf.stat().st_size}]}))
        return
    if re.fullmatch(r"[\w.-]+/[\w.-]+", value):  # ORG/NAME: a snapshot in the hub cache
        repo = home / ".cache" / "huggingface" / "hub" / ("models--" + value.replace("/", "--"))
        snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
        if not snapshot.exists():
            shutil.copytree(folder, snapshot)
            (repo / "refs").mkdir(parents=True, exist_ok=True)
            (repo / "refs" / "main").write_text(snapshot.name)
        return
    if not value.startswith("~/"):
        fail(f"a recipe's MODEL={value} is neither ollama:NAME, ORG/NAME nor a ~/ path; teach this test where to put it")
    target = home / value[2:]
    target.parent.mkdir(parents=True, exist_ok=True)
    if value.endswith(".gguf"):
        shutil.copyfile(gguf, target)
    elif not target.exists():
        shutil.copytree(folder, target)


def check_modelfiles(work):
    for modelfile in work.rglob("Modelfile*"):
        for line in modelfile.read_text().splitlines():
            if line.upper().startswith(("FROM ", "ADAPTER ")):
                gguf = modelfile.parent / line.split(None, 1)[1].strip()
                if not gguf.is_file() or gguf.read_bytes()[:4] != b"GGUF":
                    fail(f"{modelfile.name} says `{line}`, but {gguf} is not a GGUF file")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ferry", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    ferry = os.path.abspath(args.ferry)
    source = pathlib.Path(args.source).resolve()
    readme = (source / "README.md").read_text(encoding="utf-8")
    recipes = marked_blocks(readme, "recipe")
    data = marked_blocks(readme, "data")
    missing = [name for name in EXPECTED_RECIPES if name not in recipes]
    if missing:
        fail(f"README.md has no block marked `<!-- recipe: {missing[0]} -->` (expected: {', '.join(EXPECTED_RECIPES)})")

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="ferry_readme_recipes_"))
    ok = False
    try:
        home, work = scratch / "home", scratch / "work"
        home.mkdir()
        (work / "build").mkdir(parents=True)
        (work / "build" / "ferry").symlink_to(ferry)
        (work / "configs").symlink_to(source / "configs")
        env = {k: v for k, v in os.environ.items()
               if k not in ("OLLAMA_MODELS", "FERRY_CACHE", "HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")}
        env["HOME"] = str(home)

        for name, body in data.items():
            lines = [line for line in body.splitlines() if line.strip()]
            for line in lines:
                try:
                    json.loads(line)
                except json.JSONDecodeError as e:
                    fail(f"README.md's example line for {name} is not JSON ({e}): {line}")
            (work / name).write_text("\n".join(lines * DATA_REPEATS) + "\n")

        folder, gguf = make_tiny_model(ferry, source, scratch, env)
        for body in recipes.values():
            for value in re.findall(r"^MODEL=(\S+)", body, re.M):
                place_model(value, home, folder, gguf)

        total = 0.0
        for name, body in recipes.items():
            script, skipped = adapt(body)
            path = scratch / f"recipe-{name}.sh"
            path.write_text("set -euo pipefail\n" + script + "\n")
            output, seconds = run(["bash", str(path)], work, env, f"recipe {name} ({path})")
            total += seconds
            check_modelfiles(work)
            note = f", left out: {len(skipped)} ollama line(s)" if skipped else ""
            print(f"recipe {name}: ok in {seconds:.1f} s{note}")
        print(f"all {len(recipes)} recipes ran in {total:.1f} s; data files: {', '.join(sorted(data))}")
        ok = True
    finally:
        if ok and os.environ.get("FERRY_KEEP_TEST_FILES") != "1":
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"readme_recipes_test: scratch files kept in {scratch}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
