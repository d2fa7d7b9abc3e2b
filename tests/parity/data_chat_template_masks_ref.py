#!/usr/bin/env python3
"""Reference ids and loss masks for tests/parity/data_chat_template_masks_parity_test.cpp: every chat
template of the corpus in tests/data/chat-templates (published models' templates) and the
synthetic ones written here with {% generation %} blocks (GENERATION_TEMPLATES), applied by transformers to a set of conversations
(system + one round, two rounds, tool use with tools, reasoning in two rounds) with a byte-level BPE
tokenizer trained here (special tokens <s>, </s>, <unk>, <pad>, <|im_start|>, <|im_end|>, ...).

For each (template, conversation), cases.json holds either {"error": true} (transformers raises:
the template refuses the conversation), or:
  - ids: apply_chat_template(messages, tools=..., tokenize=True)'s input_ids;
  - mask: for a template with {% generation %}, transformers' return_assistant_tokens_mask; else
    the tokens (offsets from the Python tokenizer) overlapping each assistant turn's span, where a
    turn's span is found by rendering prefixes with transformers: P = messages[:i] with
    add_generation_prompt=True, Q = messages[:i+1] without, R = messages[:i] without; the span is
    [common prefix of P and Q, len(Q)) (the answer and the end-of-turn text after it) when Q is a
    prefix of the whole text and either P is a prefix of Q or R is a prefix of Q no longer than the
    common prefix (the generation prompt differs from the turn's own header only after the earlier
    turns: trailing layout whitespace, a "<think>" opener). Each such span is
    counted as holding the assistant's content (or its tool call's name) or not (a template may
    render a tool call without its name, or no tool call at all);
  - no_span: true when no turn has a span (Ferry must refuse the conversation with an InputError).
The tool schema and tool call keys are in written (not sorted) order, so `tojson` shows whether
the data's key order reaches the template. Also (tool_lines, see there) a preference pair and an
RL prompt with tools: OUTDIR/pairs.jsonl and OUTDIR/prompts.jsonl.
Each template entry says whether it is from the corpus or synthetic ("source"), so the C++ test can
count both. Writes OUTDIR/tokenizer/ (the tokenizer folder), OUTDIR/templates/<name>.jinja and
OUTDIR/cases.json.
"""
import json
import os
import pathlib
import random
import re
import sys
import warnings

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import transformers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

transformers.logging.set_verbosity_error()
HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = ROOT / "tests" / "data" / "chat-templates"
sys.path.insert(0, str(HERE))
from tokenizer_bpe_ref import corpus_text, split_corpus  # noqa: E402
from tokenizer_chat_templates_ref import build_bpe  # noqa: E402

SPECIALS = ["<s>", "</s>", "<unk>", "<pad>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|begin_of_text|>"]

# Synthetic templates with {% generation %} blocks (transformers' assistant masks).
GENERATION_TEMPLATES = {
    "generation__chatml": (
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
        "{% endgeneration %}{{ '\\n' }}{% else %}{{ message['content'] + '<|im_end|>\\n' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"),
    "generation__llama3": (
        "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' }}"
        "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] | trim }}{{ '<|eot_id|>' }}{% endgeneration %}"
        "{% else %}{{ m['content'] | trim + '<|eot_id|>' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"),
}

# Keys in the order tool schemas are written (not sorted): a template's `tojson` writes them in the
# data's order, which Ferry's data reader keeps.
TOOLS = [{"type": "function",
          "function": {"name": "add", "description": "Adds two integers.",
                       "parameters": {"type": "object",
                                      "properties": {"b": {"type": "integer", "description": "second"},
                                                     "a": {"type": "integer", "description": "first"}},
                                      "required": ["a", "b"]}}}]
TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": {"b": 25, "a": 17}}}


def m(role, content, **fields):
    return {"role": role, "content": content, **fields}


CONVERSATIONS = [
    ("system, one round", [m("system", "Be brief."), m("user", "What is 2 + 3?"), m("assistant", "It is 5.")], None),
    ("two rounds", [m("user", "Hi there"), m("assistant", "Hello! How can I help?"), m("user", "Reverse: red cat"),
                    m("assistant", "cat red")], None),
    ("tool use", [m("user", "What is 17 + 25? Use the tool."),
                  {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
                  m("tool", "42", name="add", tool_call_id="call_1"),
                  m("assistant", "17 + 25 = 42.")], TOOLS),
    ("reasoning, two rounds", [m("user", "Is 7 prime?"), m("assistant", "Yes, 7 is prime.", reasoning_content="7 has no divisors but 1 and 7."),
                               m("user", "And 9?"), m("assistant", "No, 9 = 3 x 3.", reasoning_content="9 is 3 squared.")], None),
]


def build_tokenizer(out):
    rng = random.Random(7)
    sentences = split_corpus(corpus_text(rng, 60_000), rng)
    sentences += [msg["content"] for _, conv, _ in CONVERSATIONS for msg in conv] * 10
    tok = build_bpe("qwen2", sentences, special_tokens=SPECIALS, vocab_size=1200)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>")
    fast.save_pretrained(str(out))
    return fast


def render(tok, template, messages, tools, generation_prompt):
    return tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                   add_generation_prompt=generation_prompt)


HOLDS = {True: 0, False: 0}  # spans that hold their turn's content (or tool name), and those that do not


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def prefix_spans(tok, template, messages, tools, text):
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        try:
            prompt = render(tok, template, messages[:i], tools, True)
            answered = render(tok, template, messages[:i + 1], tools, False)
        except Exception:  # noqa: BLE001 - a template may refuse a prefix: that turn has no span
            continue
        try:
            before = render(tok, template, messages[:i], tools, False)
        except Exception:  # noqa: BLE001
            before = None
        start = common_prefix(prompt, answered)
        # The answer starts where the prompt and the answered conversation part; that must be inside
        # the new turn (after what the earlier turns render), or the prompt must be a prefix.
        inside = before is not None and answered.startswith(before) and start >= len(before)
        if not (start == len(prompt) or inside) or len(answered) <= start or not text.startswith(answered):
            continue
        span = answered[start:]
        wanted = message["content"].strip() or message["tool_calls"][0]["function"]["name"]
        HOLDS[wanted in span] += 1
        spans.append((start, len(answered)))
    return spans


def case(tok, name, template, note, messages, tools):
    try:
        text = render(tok, template, messages, tools, False)
    except Exception:  # noqa: BLE001
        return {"note": note, "error": True}
    if re.search(r"\{%-?\s*generation\s*-?%\}", template):
        out = tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        return {"note": note, "error": False, "text": text, "ids": out["input_ids"], "mask": out["assistant_masks"],
                "no_span": not any(out["assistant_masks"]), "generation": True}
    ids = tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=True,
                                  return_dict=True)["input_ids"]
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert enc["input_ids"] == ids
    spans = prefix_spans(tok, template, messages, tools, text)
    mask = [int(any(s < b and e > a for a, b in spans)) for s, e in enc["offset_mapping"]]
    return {"note": note, "error": False, "text": text, "ids": ids, "mask": mask, "no_span": not spans,
            "generation": False}


# Lines with `tools` for the other readers of chat data, rendered by templates with tool branches:
# a preference pair (train-dpo, train-rm, ferry score) and a prompt (train-ppo/grpo prompt files,
# ferry eval). Expected: the chosen / rejected ids of apply_chat_template(prompt + response,
# tools=...), the number of tokens they share with apply_chat_template(prompt, add_generation_prompt=True)
# (none of which is trained), and the RL prompt's ids with a generation prompt.
TOOL_TEMPLATES = {"qwen2.5": ROOT / "configs/templates/jinja/qwen2.5/Qwen2.5-7B-Instruct.jinja",
                  "hermes3": CORPUS / "llamacpp__NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"}
TOOL_PROMPT = [m("system", "You can call tools."), m("user", "What is 17 + 25?"),
               {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
               m("tool", "42", name="add", tool_call_id="call_1")]
PAIR = {"prompt": TOOL_PROMPT, "chosen": [m("assistant", "17 + 25 = 42.")],
        "rejected": [m("assistant", "It is 43.")], "tools": TOOLS}
RL_PROMPT = {"messages": [m("user", "Add 3 and 4 with the tool.")], "tools": TOOLS, "gt_answer": "7"}


def tool_lines(tok, out):
    (out / "pairs.jsonl").write_text(json.dumps(PAIR, ensure_ascii=False) + "\n")
    (out / "prompts.jsonl").write_text(json.dumps(RL_PROMPT, ensure_ascii=False) + "\n")
    result = []
    for name, path in TOOL_TEMPLATES.items():
        template = path.read_text(encoding="utf-8")
        file = out / "templates" / f"tools__{name}.jinja"
        file.write_text(template, encoding="utf-8")
        ids = lambda messages, **o: tok.apply_chat_template(messages, tools=TOOLS, chat_template=template,
                                                            tokenize=True, return_dict=True, **o)["input_ids"]
        chosen, rejected = ids(PAIR["prompt"] + PAIR["chosen"]), ids(PAIR["prompt"] + PAIR["rejected"])
        prompt = ids(PAIR["prompt"], add_generation_prompt=True)
        shared = min(common_prefix(prompt, chosen), common_prefix(prompt, rejected))  # tokens before any answer
        text = tok.apply_chat_template(PAIR["prompt"] + PAIR["chosen"], tools=TOOLS, chat_template=template,
                                       tokenize=False)
        assert '{"type": "function", "function": {"name": "add"' in text and '"b": 25, "a": 17' in text, text
        result.append({"name": name, "file": str(file), "chosen": chosen, "rejected": rejected,
                       "prompt_tokens": shared, "rl_prompt": ids(RL_PROMPT["messages"], add_generation_prompt=True)})
    return result


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    (out / "templates").mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(out / "tokenizer")
    templates = {p.stem: p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.jinja"))}
    if not templates:
        print(f"data_chat_template_masks_ref: no templates in {CORPUS}", file=sys.stderr)
        return 1
    corpus = len(templates)
    templates.update(GENERATION_TEMPLATES)
    result = {"transformers_version": transformers.__version__, "templates": []}
    for name, template in templates.items():
        path = out / "templates" / f"{name}.jinja"
        path.write_text(template, encoding="utf-8")
        cases = [case(tok, name, template, note, messages, tools) for note, messages, tools in CONVERSATIONS]
        result["templates"].append({"name": name, "file": str(path),
                                    "source": "synthetic" if name in GENERATION_TEMPLATES else "corpus",
                                    "cases": cases})
    result["conversations"] = [{"note": note, "messages": messages, "tools": tools}
                               for note, messages, tools in CONVERSATIONS]
    result["tool_lines"] = tool_lines(tok, out)
    (out / "cases.json").write_text(json.dumps(result, ensure_ascii=False, indent=1))
    rendered = [c for t in result["templates"] for c in t["cases"] if not c["error"]]
    print(f"data_chat_template_masks_ref: transformers {transformers.__version__}, {len(templates)} templates "
          f"({corpus} from {CORPUS.relative_to(ROOT)}, {len(GENERATION_TEMPLATES)} synthetic) x "
          f"{len(CONVERSATIONS)} conversations: {len(rendered)} rendered, "
          f"{sum(c['no_span'] for c in rendered)} without a trainable turn, "
          f"{sum(c['generation'] for c in rendered)} with generation masks; turn spans holding their content "
          f"{HOLDS[True]}, not {HOLDS[False]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
