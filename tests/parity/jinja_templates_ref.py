#!/usr/bin/env python3
"""Reference renders for tests/parity/jinja_templates_parity_test.cpp: every chat template in
tests/data/chat-templates/*.jinja (the corpus of published models' templates) and the synthetic
templates written here with {% generation %} blocks (GENERATION_TEMPLATES), rendered by transformers'
apply_chat_template(messages, tools=..., tokenize=False, add_generation_prompt=..., **extra) with a
minimal tokenizer (bos_token '<s>', eos_token '</s>') for each conversation below.

strftime_now() is pinned to 2024-07-26 10:30:00 (transformers' module-level `datetime` is replaced);
the C++ side pins RenderOptions::now to the same time.

For each (template, conversation) cases.json holds:
  - variables: exactly what the template saw, captured from jinja2's Template.render (after
    transformers' normalisation of the messages: None values dropped, reasoning fields aliased,
    special tokens added), so the C++ renderer gets the same input;
  - expected: the text, or raises: the Python exception ("TypeError: ...") and raises_kind, which
    kind of error it is (error_kind below: raised, undefined, type, syntax or other);
  - generation_spans: for templates with {% generation %}, the [begin, end) byte ranges of the
    assistant text, from render_jinja_template(return_assistant_tokens_mask=True) (transformers'
    AssistantTracker gives character offsets; converted to UTF-8 byte offsets here).
and "templates" maps each template name to its source, "corpus" lists the names read from
tests/data/chat-templates and "synthetic" those of GENERATION_TEMPLATES.

Writes OUTDIR/cases.json.
"""
import datetime
import json
import os
import pathlib
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import jinja2  # noqa: E402
import transformers  # noqa: E402
import transformers.utils.chat_template_utils as ctu  # noqa: E402
from tokenizers import Tokenizer, models  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

transformers.logging.set_verbosity_error()
HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NOW = datetime.datetime(2024, 7, 26, 10, 30, 0)


class PinnedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


ctu.datetime = PinnedDatetime


CORPUS = ROOT / "tests" / "data" / "chat-templates"


# Synthetic templates with {% generation %} blocks, for the spans: top level, inside an if, a loop body with
# non-ASCII text, and one inside a macro (where transformers' offsets count only top-level text).
GENERATION_TEMPLATES = {
    "generation__chatml.jinja": (
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
        "{% endgeneration %}{{ '\\n' }}{% else %}{{ message['content'] + '<|im_end|>\\n' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"),
    "generation__trimmed.jinja": (
        "{{ bos_token }}{%- for m in messages -%}\n"
        "  {%- if m.role == 'assistant' -%}\n"
        "    {%- generation -%}[A] {{ m.content | trim }}{{ eos_token }}{%- endgeneration -%}\n"
        "  {%- else -%}[{{ m.role | upper }}] {{ m.content | trim }}\n{% endif -%}\n"
        "{%- endfor -%}"),
    "generation__macro.jinja": (
        "{%- macro answer(text) -%}<a>{% generation %}{{ text }}{% endgeneration %}</a>{%- endmacro -%}"
        "{%- for m in messages -%}{%- if m.role == 'assistant' -%}{{ answer(m.content) }}"
        "{%- else -%}<{{ m.role }}>{{ m.content }}{%- endif -%}{%- endfor -%}"),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web; returns the top results.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "default": 3, "minimum": 1},
                "filters": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["query"],
        },
    },
}


def m(role, content, **extra):
    return {"role": role, "content": content, **extra}


def tool_call(name, arguments, call_id):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def conversations():
    """(note, messages, tools, add_generation_prompt, extra template variables)."""
    weather_call = [tool_call("get_weather", {"city": "Paris", "unit": "celsius"}, "call0wx42")]
    tool_turns = [
        m("system", "You can call tools."),
        m("user", "What's the weather in Paris?"),
        {"role": "assistant", "content": "", "tool_calls": weather_call},
        {"role": "tool", "tool_call_id": "call0wx42", "name": "get_weather", "content": '{"temperature": 21, "sky": "clear"}'},
        m("assistant", "It is 21 °C and clear in Paris."),
        m("user", "And tomorrow?"),
    ]
    return [
        ("one user turn", [m("user", "Hi")], None, True, {}),
        ("system and three rounds, prompt", [
            m("system", "Be brief."), m("user", "Sort: 5 2 9"), m("assistant", "2 5 9"),
            m("user", "Largest?"), m("assistant", "9"), m("user", "And the sum?")], None, True, {}),
        ("no system, ends with assistant", [
            m("user", "Spell garden backwards"), m("assistant", "nedrag"),
            m("user", "Now 'cat'"), m("assistant", "tac")], None, False, {}),
        ("empty contents", [m("system", ""), m("user", ""), m("assistant", ""), m("user", "")], None, True, {}),
        ("unicode and emoji", [
            m("system", "Réponds en français 🇫🇷"), m("user", "café 日本 🙂? naïve — ß"),
            m("assistant", "Ça va 👍🏽 語")], None, False, {}),
        ("tool call and result", tool_turns, [WEATHER_TOOL, SEARCH_TOOL], True, {}),
        ("tool call, arguments as a JSON string", [
            m("user", "Search for cats"),
            {"role": "assistant", "content": "",
             "tool_calls": [tool_call("search", '{"query": "cats", "limit": 2}', "call9sr17")]},
            {"role": "tool", "tool_call_id": "call9sr17", "content": "cats are mammals"}],
         [SEARCH_TOOL], True, {}),
        ("tools offered, plain answer", [m("user", "Hello there"), m("assistant", "Hi! How can I help?")],
         [WEATHER_TOOL], False, {}),
        ("generation prompt off, ends with user", [m("system", "S"), m("user", "Q")], None, False, {}),
        ("enable_thinking true", [m("user", "Think about 2+2"), m("assistant", "4"), m("user", "And 3+3?")],
         None, True, {"enable_thinking": True}),
        ("enable_thinking false", [m("user", "Think about 2+2"), m("assistant", "4"), m("user", "And 3+3?")],
         None, True, {"enable_thinking": False}),
        ("whitespace around contents", [
            m("system", "  Be brief.\n"), m("user", "\n  What is 2 + 2?  \n"), m("assistant", "  4\n\n"),
            m("user", "\tThanks!\u3000")], None, True, {}),
        ("multi-line contents", [
            m("user", "line one\nline two\n\nline four"), m("assistant", "first\n  indented\nlast"),
            m("user", "```python\nprint('hi')\n```")], None, True, {}),
        ("reasoning content", [
            m("user", "Is 7 prime?"), m("assistant", "Yes.", reasoning_content="7 has no divisors but 1 and 7."),
            m("user", "And 9?")], None, True, {}),
        ("assistant last, generation prompt on", [m("user", "Hi"), m("assistant", "Hello!")], None, True, {}),
        ("extra variables", [m("user", "What day is it?")], None, True,
         {"date_string": "26 Jul 2024", "functions": "[]", "datetime": "2024-07-26", "custom_instructions": "Be kind."}),
    ]


def make_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                  bos_token="<s>", eos_token="</s>")
    return tok


class Capture:
    """The keyword arguments of the last jinja2 Template.render / generate call."""

    def __init__(self):
        self.variables = None
        original_render, original_generate = jinja2.Template.render, jinja2.Template.generate
        capture = self

        def render(template, *args, **kwargs):
            capture.variables = json.loads(json.dumps(kwargs))
            return original_render(template, *args, **kwargs)

        def generate(template, *args, **kwargs):
            capture.variables = json.loads(json.dumps(kwargs))
            return original_generate(template, *args, **kwargs)

        jinja2.Template.render = render
        jinja2.Template.generate = generate


def byte_spans(text, char_spans):
    offsets = [0]
    for ch in text:
        offsets.append(offsets[-1] + len(ch.encode("utf-8")))
    return [[offsets[a], offsets[b]] for a, b in char_spans]


def error_kind(e):
    """Which kind of error transformers raised, as the C++ test compares it with Ferry's ErrorKind:
    raised (jinja2's TemplateError from the template's own raise_exception(), the function
    transformers defines), undefined (jinja2's UndefinedError), type (Python's TypeError), syntax
    (TemplateSyntaxError, the template does not compile) or other (any other exception)."""
    if isinstance(e, jinja2.exceptions.UndefinedError):
        return "undefined"
    if isinstance(e, jinja2.exceptions.TemplateSyntaxError):
        return "syntax"
    if isinstance(e, TypeError):
        return "type"
    if type(e) is jinja2.exceptions.TemplateError:
        tb = e.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        if tb.tb_frame.f_code.co_name == "raise_exception":
            return "raised"
    return "other"


def render_case(tok, capture, source, messages, tools, add_generation_prompt, extra):
    case = {}
    capture.variables = None
    try:
        text = tok.apply_chat_template(messages, tools=tools, chat_template=source, tokenize=False,
                                       add_generation_prompt=add_generation_prompt, **extra)
        case["expected"] = text
    except Exception as e:  # noqa: BLE001 - any failure of the reference is a case to match
        case["raises"] = f"{type(e).__name__}: {e}"
        case["raises_kind"] = error_kind(e)
    if capture.variables is None:
        raise RuntimeError("transformers did not reach the template: the case would test nothing")
    case["variables"] = capture.variables
    if "expected" in case and "{% generation" in source.replace("{%-", "{%"):
        variables = dict(capture.variables)
        chat = variables.pop("messages")
        text, spans = ctu.render_jinja_template([chat], chat_template=source, return_assistant_tokens_mask=True,
                                                **variables)
        if text[0] != case["expected"]:
            raise RuntimeError("render_jinja_template and apply_chat_template disagree")
        case["generation_spans"] = byte_spans(text[0], spans[0])
    return case


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    sources = {p.name: p.read_bytes().decode("utf-8") for p in sorted(CORPUS.glob("*.jinja"))}
    if not sources:
        sys.exit(f"jinja_templates_ref: no chat templates in {CORPUS}")
    corpus = list(sources)
    sources.update(GENERATION_TEMPLATES)
    tok = make_tokenizer()
    capture = Capture()
    cases, raised = [], 0
    for name, source in sources.items():
        for note, messages, tools, add_generation_prompt, extra in conversations():
            case = render_case(tok, capture, source, messages, tools, add_generation_prompt, extra)
            case.update(template=name, conversation=note)
            raised += "raises" in case
            cases.append(case)
    fixture = {"now": NOW.isoformat(), "transformers": transformers.__version__, "jinja2": jinja2.__version__,
               "templates": sources, "corpus": corpus, "synthetic": list(GENERATION_TEMPLATES), "cases": cases}
    (out / "cases.json").write_text(json.dumps(fixture, ensure_ascii=False, indent=1), encoding="utf-8")
    spans = sum("generation_spans" in c for c in cases)
    kinds = {}
    for c in cases:
        if "raises_kind" in c:
            kinds[c["raises_kind"]] = kinds.get(c["raises_kind"], 0) + 1
    print(f"jinja_templates: {len(sources)} templates ({len(corpus)} from {CORPUS.relative_to(ROOT)}, "
          f"{len(GENERATION_TEMPLATES)} synthetic) x {len(conversations())} conversations = {len(cases)} cases "
          f"({raised} raise in transformers: {kinds}; {spans} with generation spans)")


if __name__ == "__main__":
    main()
