#!/usr/bin/env python3
"""`ferry export --format ollama`'s Modelfile as Ollama reads and renders it.

For published chat templates (tests/data/chat-templates: ChatML, Llama 3, Gemma with its system
message in the first turn, Gemma 2 without one, Phi-3, Zephyr, Mistral, Llama 3.2, QwQ; with
--all, every one the export writes as a TEMPLATE), this
  1. exports a tiny llama (tests/parity/gguf_export_ref.py's llama_spm, with BOS <s> and EOS </s>)
     with `ferry export --format ollama --chat-template FILE`, once from a run whose training data
     shares a system prompt (so the Modelfile has SYSTEM) and, for ChatML, from a bare model;
  2. reads each Modelfile with tests/scripts/ollama_modelfile_check.go, built with Debian's Go: the
     grammar of Ollama's parser (parser/parser.go), then the TEMPLATE executed by Go's text/template
     on the data Ollama's /api/chat gives it (template/template.go, server/routes.go: the Modelfile's
     SYSTEM first when the conversation has none, system messages as .System, .Messages collated);
  3. renders the same conversations with the template's own Jinja through transformers'
     render_jinja_template (the deps venv; jinja2 as apply_chat_template runs it), the Modelfile's
     SYSTEM added where Ollama adds it, and requires the two prompts to be equal, character for
     character. The Jinja text's leading BOS (<s>) is left out: llama.cpp adds BOS when it tokenizes
     Ollama's prompt. Conversations: three user turns with two answers, with and without a system
     message, with a newline inside a message.
It also checks FROM names the exported GGUF beside the Modelfile, SYSTEM is the training data's
prompt (none for a bare model or a template without system messages), the stop parameters are the
end of an answer as the template writes it, whole (stop_findings: read off the Jinja renderings of
[user, answer, user] and the closed [user, answer]; never a piece of a marker; EOS where the template
writes nothing after the final answer), and the Go parser itself on a few hand-written Modelfiles (comments,
unquoted and quoted values, lower-case commands, and refusals: no FROM, an unclosed quote, an
unknown command).

Without `go` on PATH the test skips with `[needs go]` (exit 77; scripts/debian-packages.txt lists
golang-go, so scripts/deps.sh installs it, and scripts/skip_guard.py fails a run that skipped on a
machine that has it).

Usage: ollama_modelfile_test.py --ferry BUILD/ferry --source SOURCE_DIR --fixtures BUILD/tests/fixtures
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
BOS, EOS = "<s>", "</s>"
TRAINING_SYSTEM = "You answer briefly."
# Templates the export must write as a TEMPLATE (as tests/unit/io_ollama_modelfile_test.cpp requires).
TEMPLATES = [
    "chujiezheng__chatml.jinja", "chujiezheng__llama-3-instruct.jinja", "chujiezheng__gemma-it.jinja",
    "llamacpp__google-gemma-2-2b-it.jinja", "chujiezheng__phi-3.jinja", "chujiezheng__zephyr.jinja",
    "chujiezheng__mistral-instruct.jinja", "llamacpp__meta-llama-Llama-3.2-3B-Instruct.jinja",
    "llamacpp__Qwen-QwQ-32B.jinja",
]
BARE = ["chujiezheng__chatml.jinja"]  # also exported without SYSTEM

TURNS = [
    {"role": "user", "content": "Hi there!"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "What is 2 + 2?\nShow the steps."},
    {"role": "assistant", "content": "2 + 2 = 4: two, then two more."},
    {"role": "user", "content": "Thanks. And 3 + 3?"},
]
CONVERSATIONS = [[{"role": "system", "content": "You are a careful tutor."}] + TURNS, TURNS]

# The Go parser on hand-written Modelfiles: (text, expected commands or the start of the error).
GRAMMAR_CASES = [
    ("# a comment\nFROM ./model.gguf\nPARAMETER temperature 0.7\nparameter stop \"<|end|>\"\n"
     "SYSTEM You are Mario.\nTEMPLATE \"\"\"{{ .Prompt }}\n\"\"\"\n",
     [["model", "./model.gguf"], ["temperature", "0.7"], ["stop", "<|end|>"], ["system", "You are Mario."],
      ["template", "{{ .Prompt }}\n"]]),
    ("FROM llama3.2\nMESSAGE user \"Is it blue?\"\nADAPTER ./a b.gguf\n",
     [["model", "llama3.2"], ["message", "user: Is it blue?"], ["adapter", "./a b.gguf"]]),
    ("PARAMETER stop \"a\\\"b\"\nFROM x\n", [["stop", "a\\\"b"], ["model", "x"]]),  # no escapes in quotes
    ('FROM x\nPARAMETER stop """say "stop""""\n', [["model", "x"], ["stop", 'say "stop"']]),  # as Ferry writes it
    ("SYSTEM hello\n", "no FROM line"),
    ("FROM x\nTEMPLATE \"\"\"never closed\n", "unexpected EOF"),
    ("FROM x\nFORM y\n", "(line 2): unknown command"),
]


def fail(message):
    print(f"ollama_modelfile_test: FAIL: {message}", file=sys.stderr)
    raise SystemExit(1)


def run(argv, cwd=None, env=None, timeout=300):
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        fail(f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def build_checker(go, source, scratch):
    env = dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="", CGO_ENABLED="0")
    if not env.get("HOME") and not env.get("XDG_CACHE_HOME") and not env.get("GOCACHE"):
        env["GOCACHE"] = str(scratch / "go-cache")
    binary = scratch / "ollama_modelfile_check"
    run([go, "build", "-o", str(binary), str(source / "tests" / "scripts" / "ollama_modelfile_check.go")],
        cwd=scratch, env=env)
    return binary


def make_models(fixtures, scratch):
    """run/final: a checkpoint beside the config.yaml of a run whose data shares a system prompt;
    bare/: the same model alone."""
    model = fixtures / "gguf_export" / "llama_spm"
    if not (model / "config.json").exists():
        fail(f"missing fixture {model} (ctest runs parity_fixture_gguf_export first)")
    final = scratch / "run" / "final"
    shutil.copytree(model, final)
    (final / "tokenizer_config.json").write_text(json.dumps({"bos_token": BOS, "eos_token": EOS}))
    chats = scratch / "chats.jsonl"
    chats.write_text("".join(json.dumps({"messages": [{"role": "system", "content": TRAINING_SYSTEM},
                                                      {"role": "user", "content": q},
                                                      {"role": "assistant", "content": a}]}) + "\n"
                             for q, a in [("Hi", "Hello"), ("2+2?", "4")]))
    (scratch / "run" / "config.yaml").write_text(f"stage: sft\ndata: {{train_file: {chats}}}\n")
    shutil.copytree(final, scratch / "bare")
    return final, scratch / "bare"


def jinja_prompt(template_text, conversation, add_generation_prompt=True):
    """The template's own rendering (transformers' jinja2 path), without the leading BOS text."""
    from transformers.utils.chat_template_utils import render_jinja_template
    rendered, _ = render_jinja_template([conversation], chat_template=template_text,
                                        add_generation_prompt=add_generation_prompt, bos_token=BOS, eos_token=EOS)
    text = rendered[0]
    return text[len(BOS):] if text.startswith(BOS) else text


def stop_findings(template_text, stops):
    """What is wrong with the stop parameters, judged on the Jinja renderings: the text the template
    writes after an answer inside a conversation ([user, answer, user], up to the next user message)
    and after the final answer of a closed one ([user, answer], as training writes it). Each stop must
    be written right there (after blanks) and end with a whole marker or where a word ends, never
    inside a marker (a lone '<', '<|end|>\n<'); EOS counts where the closed conversation ends with the
    answer (the model ends it with a token the template does not write). And each of the two texts
    that is not blank must start with a stop, so the model stops where the answer ends."""
    question, answer, next_question = "QZXQUESTIONQZX", "QZXANSWERQZX", "QZXNEXTQZX"
    opened = jinja_prompt(template_text, [{"role": "user", "content": question},
                                          {"role": "assistant", "content": answer},
                                          {"role": "user", "content": next_question}])
    closed = jinja_prompt(template_text, [{"role": "user", "content": question},
                                          {"role": "assistant", "content": answer}], add_generation_prompt=False)
    after = {"inside": opened[opened.index(answer) + len(answer):opened.index(next_question)].lstrip(),
             "closed": closed[closed.index(answer) + len(answer):].lstrip()}
    findings = []
    if not stops:
        findings.append("no stop parameter")
    for stop in stops:
        if stop == EOS and not after["closed"].strip():
            continue
        where = [text for text in after.values() if text.startswith(stop)]
        if not where:
            findings.append(f"{stop!r} is not what the template writes after an answer: {after}")
        elif stop.rfind("<") > stop.rfind(">") or not stop.endswith(">") and not all(
                len(text) == len(stop) or text[len(stop)].isspace() or text[len(stop)] == "<" for text in where):
            findings.append(f"{stop!r} ends inside what the template writes after an answer: {after}")
    for kind, text in after.items():
        if text.strip() and not any(text.startswith(stop) for stop in stops):
            findings.append(f"no stop where the answer ends ({kind}): {text[:80]!r}")
    if not after["closed"].strip() and EOS not in stops:
        findings.append(f"the closed conversation ends with the answer, but EOS {EOS!r} is no stop")
    return findings


def first_difference(a, b):
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"at character {i}:\n  Ollama: {a[max(0, i - 60):i + 60]!r}\n  Jinja:  {b[max(0, i - 60):i + 60]!r}"


class Mismatch(Exception):
    pass


def check_export(result, template_text, with_system):
    """Checks one exported Modelfile as Ollama read and rendered it; returns the prompts compared."""
    if result.get("error"):
        raise Mismatch(f"{result['modelfile']}: {result['error']}")
    commands = [c["name"] for c in result["commands"]]
    model = [c["args"] for c in result["commands"] if c["name"] == "model"]
    if model != ["./model.gguf"] or not (pathlib.Path(result["modelfile"]).parent / model[0]).is_file():
        raise Mismatch(f"FROM is {model}, not the exported ./model.gguf beside the Modelfile")
    if commands.count("template") != 1 or commands.count("system") > 1:
        raise Mismatch(f"commands {commands}")
    system = result["system"]
    expected_system = TRAINING_SYSTEM if with_system else ""
    takes_system = True
    try:
        jinja_prompt(template_text, CONVERSATIONS[0])
    except Exception:  # the template refuses system messages (Gemma 2): the export leaves SYSTEM out
        takes_system, expected_system = False, ""
    if system != expected_system:
        raise Mismatch(f"SYSTEM is {system!r}, expected {expected_system!r}")
    compared = 0
    for conversation, ollama in zip(CONVERSATIONS, result["renderings"]):
        if conversation[0]["role"] == "system" and not takes_system:
            continue
        asked = conversation if conversation[0]["role"] == "system" or not system else \
            [{"role": "system", "content": system}] + conversation
        jinja = jinja_prompt(template_text, asked)
        if ollama != jinja:
            kind = "with" if asked[0]["role"] == "system" else "without"
            raise Mismatch(f"Ollama's prompt differs from the Jinja template's ({kind} a system message) "
                           + first_difference(ollama, jinja))
        compared += 1
    findings = stop_findings(template_text, result["stops"])
    if findings:
        raise Mismatch(f"stop parameters {result['stops']}: " + "; ".join(findings))
    return compared


def check_grammar(checker, scratch):
    cases = []
    for i, (text, _) in enumerate(GRAMMAR_CASES):
        path = scratch / f"grammar-{i}.Modelfile"
        path.write_text(text)
        cases.append({"modelfile": str(path), "conversations": []})
    (scratch / "grammar.json").write_text(json.dumps(cases))
    results = json.loads(run([str(checker), str(scratch / "grammar.json")]))
    for (text, expected), got in zip(GRAMMAR_CASES, results):
        if isinstance(expected, str):
            if expected not in got.get("error", ""):
                fail(f"the Go parser should refuse {text!r} with {expected!r}; it gave {got}")
        elif got.get("error") or [[c["name"], c["args"]] for c in got["commands"]] != expected:
            fail(f"the Go parser read {text!r} as {got}, expected {expected}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ferry", required=True, type=pathlib.Path)
    parser.add_argument("--source", required=True, type=pathlib.Path)
    parser.add_argument("--fixtures", required=True, type=pathlib.Path)
    parser.add_argument("--all", action="store_true",
                        help="every corpus template the export writes as a TEMPLATE, not only the list above")
    args = parser.parse_args()
    go = shutil.which("go")
    if not go:
        print("[needs go] Go's text/template renders the Modelfile's TEMPLATE as Ollama does: apt-get install "
              "golang-go (scripts/deps.sh installs it)")
        return SKIP
    started = time.monotonic()
    source, ferry = args.source.resolve(), args.ferry.resolve()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="ollama_modelfile_"))
    checker = build_checker(go, source, scratch)
    check_grammar(checker, scratch)
    final, bare = make_models(args.fixtures.resolve(), scratch)

    corpus = source / "tests" / "data" / "chat-templates"
    names = sorted(p.name for p in corpus.glob("*.jinja")) if args.all else TEMPLATES
    exports, cases = [], []
    for name, checkpoint in [(name, final) for name in names] + [(name, bare) for name in BARE]:
        out = scratch / "out" / f"{checkpoint.name}-{name.removesuffix('.jinja')}"
        said = run([str(ferry), "export", "--format", "ollama", "--checkpoint", str(checkpoint), "--output", str(out),
                    "--chat-template", str(corpus / name)])
        if "(TEMPLATE from the chat template" not in said:
            if args.all:
                continue
            fail(f"{name}: the export wrote no TEMPLATE:\n{said}")
        exports.append((name, checkpoint))
        cases.append({"modelfile": str(out / "Modelfile"), "conversations": CONVERSATIONS})
    (scratch / "cases.json").write_text(json.dumps(cases))
    results = json.loads(run([str(checker), str(scratch / "cases.json")]))

    compared, problems = 0, []
    for (name, checkpoint), result in zip(exports, results):
        where = f"{name} ({'bare model' if checkpoint == bare else 'run with a system prompt'})"
        try:
            compared += check_export(result, (corpus / name).read_text(), with_system=checkpoint != bare)
        except Mismatch as e:
            if not args.all:
                fail(f"{where}: {e}")
            problems.append(f"{where}: {e}")
    if problems:
        fail(f"{len(problems)} of {len(exports)} Modelfiles:\n" + "\n".join(problems))
    shutil.rmtree(scratch)
    print(f"ollama_modelfile_test: {len(exports)} Modelfiles read by Ollama's grammar, {compared} prompts "
          f"rendered by Go's text/template equal to the Jinja templates', {len(GRAMMAR_CASES)} grammar cases; "
          f"{time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
