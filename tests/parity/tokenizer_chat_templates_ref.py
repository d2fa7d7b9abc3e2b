#!/usr/bin/env python3
"""Reference renders, ids and loss masks for tests/parity/tokenizer_chat_templates_parity_test.cpp:
the real Hugging Face chat templates (configs/templates/jinja/<template>/<model>.jinja, copied from
those models' tokenizer_config.json) rendered by transformers' apply_chat_template, and the text
encoded by the family's tokenizer as transformers encodes it.

For each Jinja file, a model folder like the family's is written to OUTDIR/<model>/:
  - llama3*: a byte-level BPE tokenizer.json trained here with Llama 3's pre-tokenizer regex and
    special tokens, bos_token <|begin_of_text|>;
  - qwen2*, smollm2: byte-level BPE with Qwen2's regex + NFC (SmolLM2: Digits), <|im_start|> and
    <|im_end|> special, eos_token <|im_end|>;
  - mistral: a SentencePiece tokenizer.model with Llama's normaliser (BPE, dummy prefix, byte
    fallback), <s> and </s>;
and the template goes into its tokenizer_config.json (Qwen2.5, Llama 3.1, Mistral, as those repos
ship it) or, as newer transformers save it, into chat_template.jinja (the others).

For every conversation (with and without a system message, one and three rounds, contents with
leading/trailing whitespace and newlines, non-ASCII text, whitespace-only answers, generation
prompts):
  - text: apply_chat_template(messages, tokenize=False, add_generation_prompt=<ends with user>),
    with date_string="26 Jul 2024" (Llama 3.2's template otherwise writes today's date; Llama 3.1's
    default is that date anyway);
  - ferry_text: the text Ferry must render (with the BOS token's text in front where the template
    writes it). The same as `text`, except for mistral, where the space the template writes after
    <s> and </s> (" [INST]") is the SentencePiece dummy prefix in Ferry's text: removed here, and
    the ids below check that both give the same tokens;
  - ids: the tokenizer's encoding of `text` (add_special_tokens=False; special-token text in the
    template becomes those ids). Conversations hold no special-token text in their messages, which
    Ferry (by design) keeps as text and transformers would not;
  - mask: 1 on tokens whose characters overlap an assistant message's content (as rendered: Llama
    3's templates trim it) or the end marker after it (<|eot_id|>, "<|im_end|>\n", </s>), found by
    rendering the conversation up to that answer (every template here renders a conversation's
    prefix as a prefix of its text, which is checked);
  - round_ends: for each answer, the number of tokens that start before its end marker ends.
  - jinja_ids: apply_chat_template(messages, tokenize=True): what `tokenizer.chat_template: auto`
    (the folder's own template, rendered by ferry::jinja) must give; equal to `ids` (checked);
  - jinja_mask: `auto`'s loss mask: tokens overlapping [end of the generation prompt's rendering of
    messages[:k], end of messages[:k+1]'s] for each answer k; the same as `mask` except where a
    template writes a space before the answer (Mistral: " 73</s>"), which this span includes.
For mistral the ids are also checked here against mistral-common's V1 encoding (each stretch
between <s> and </s> encoded by SentencePiece on its own, with the dummy prefix, and the
template's space after <s> / </s> left out), with transformers' Llama tokenizer in both legacy
modes.

Writes OUTDIR/<model>/ and OUTDIR/cases.json.
"""
import io
import json
import os
import pathlib
import random
import sys
import time
import warnings

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import sentencepiece as spm  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: E402

transformers.logging.set_verbosity_error()
HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
JINJA_DIR = ROOT / "configs" / "templates" / "jinja"
sys.path.insert(0, str(HERE))
from tokenizer_bpe_ref import LLAMA3_PATTERN, QWEN2_PATTERN, corpus_text, split_corpus  # noqa: E402

DATE = "26 Jul 2024"

# The family of each template folder, written out here independently of configs/templates/*.yaml:
# its tokenizer, BOS/EOS texts, the end-of-answer marker the loss covers, whether the template
# trims message contents, and where the folder keeps the template.
LLAMA3 = dict(tokenizer="llama3", bos="<|begin_of_text|>", eos="<|eot_id|>", end_marker="<|eot_id|>", trims=True)
CHATML = dict(bos=None, eos="<|im_end|>", end_marker="<|im_end|>\n", trims=False)
FAMILIES = {
    "llama3": dict(LLAMA3, in_config=False),
    "llama3.1": dict(LLAMA3, in_config=True),
    "llama3.2": dict(LLAMA3, in_config=False),
    "qwen2": dict(CHATML, tokenizer="qwen2", in_config=False),
    "qwen2.5": dict(CHATML, tokenizer="qwen2", in_config=True),
    "smollm2": dict(CHATML, tokenizer="smollm2", bos="<|im_start|>", in_config=False),
    "mistral": dict(tokenizer="mistral", bos="<s>", eos="</s>", end_marker="</s>", trims=False, in_config=True),
}

SYSTEM = "You are a careful assistant. Reply with the answer only."


def conversations():
    """(messages, note) pairs; answers differ from every other message so a mistake shows."""
    m = lambda role, content: {"role": role, "content": content}
    return [
        ([m("system", SYSTEM), m("user", "What is 37 + 48 - 12?"), m("assistant", "73")], "system, one round"),
        ([m("user", "Spell the word backwards: garden"), m("assistant", "nedrag")], "no system, one round"),
        ([m("system", "Be brief."), m("user", "Sort: 5 2 9"), m("assistant", "2 5 9"),
          m("user", "Now the largest?"), m("assistant", "9"),
          m("user", "And the sum?"), m("assistant", "The sum is 16.")], "system, three rounds"),
        ([m("user", "Hi"), m("assistant", "Hello! How can I help?"), m("user", "Reverse: red cat sun"),
          m("assistant", "sun cat red"), m("user", "Count the letters in garden"), m("assistant", "6")],
         "no system, three rounds"),
        ([m("system", "  Be brief.\n"), m("user", "\n  What is 2 + 2?  \n"), m("assistant", "  4\n\n"),
          m("user", "\tThanks!\u3000"), m("assistant", "\u00a0You're welcome.\x1c \n")],
         "leading and trailing whitespace, newlines, tabs, U+3000, U+00A0, U+001C"),
        ([m("user", "line one\nline two\n\nline four"), m("assistant", "first\n  indented\nlast")],
         "newlines inside"),
        ([m("user", "café 日本 🙂?"), m("assistant", "naïve — 語 👍🏽")], "non-ASCII"),
        ([m("user", "Say nothing."), m("assistant", "   ")], "whitespace-only answer"),
        ([m("user", "What is 2 + 3?")], "generation prompt"),
        ([m("system", SYSTEM), m("user", "  Spell: cat \n")], "generation prompt, system, whitespace"),
        ([m("system", "Be brief."), m("user", "Sort: 3 1 2"), m("assistant", "1 2 3"), m("user", "Reverse it"),
          m("assistant", "3 2 1"), m("user", "Largest?")], "generation prompt after two rounds"),
    ]


# --- tokenizers ------------------------------------------------------------------------------

def train_bpe(tok, sentences, vocab_size, special_tokens):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=special_tokens, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(sentences, trainer)
    return tok


def build_bpe(kind, sentences, special_tokens=None, vocab_size=1500):
    """A byte-level BPE tokenizer like the family's (llama3, qwen2 or smollm2), trained on
    `sentences`, with the family's special tokens unless `special_tokens` are given. Also used by
    generate_chat_template_ref.py and data_chat_template_masks_ref.py."""
    tok = Tokenizer(models.BPE())
    if kind == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    elif kind == "qwen2":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    else:  # smollm2
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)  # offsets keep their spaces
    return train_bpe(tok, sentences, vocab_size, special_tokens or specials)


def build_sentencepiece(sentences):
    spm.set_random_generator_seed(7)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=800, byte_fallback=True,
        split_digits=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, character_coverage=1.0, num_threads=1,
        input_sentence_size=0, shuffle_input_sentence=False, hard_vocab_limit=False, minloglevel=2,
        model_type="bpe", normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False)
    return model.getvalue()


def write_folder(folder, family, jinja, tokenizers_by_kind, sp_model):
    """A model folder as the family's repos have it; returns the transformers tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    if family["tokenizer"] == "mistral":
        (folder / "tokenizer.model").write_bytes(sp_model)
        config = {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                  "add_bos_token": True, "legacy": False, "chat_template": jinja}
        (folder / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1))
        return AutoTokenizer.from_pretrained(str(folder))
    tok = PreTrainedTokenizerFast(tokenizer_object=tokenizers_by_kind[family["tokenizer"]],
                                  bos_token=family["bos"], eos_token=family["eos"])
    tok.chat_template = jinja
    tok.save_pretrained(str(folder))
    config_path, jinja_path = folder / "tokenizer_config.json", folder / "chat_template.jinja"
    if family["in_config"]:  # as older repos keep it (and Ferry reads both)
        config = json.loads(config_path.read_text())
        config["chat_template"] = jinja
        config_path.write_text(json.dumps(config, ensure_ascii=False, indent=1))
        if jinja_path.exists():
            jinja_path.unlink()
    else:
        assert jinja_path.exists() and "chat_template" not in json.loads(config_path.read_text())
    return tok


# --- references ------------------------------------------------------------------------------

def render(tok, messages, generation_prompt):
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                   date_string=DATE)


def mistral_common_ids(sp, text):
    """mistral-common's V1 encoding of a rendered text: <s>/</s> as ids, each stretch between them
    encoded on its own with the dummy prefix (the template's space after <s>/</s> left out)."""
    ids, pos = [], 0
    while pos < len(text):
        if text.startswith("<s>", pos) or text.startswith("</s>", pos):
            ids.append(sp.bos_id() if text.startswith("<s>", pos) else sp.eos_id())
            pos += 3 if text.startswith("<s>", pos) else 4
            continue
        end = min([i for i in (text.find("<s>", pos), text.find("</s>", pos)) if i >= 0] + [len(text)])
        stretch = text[pos:end]
        if ids and stretch.startswith(" "):
            stretch = stretch[1:]
        ids += sp.encode(stretch)
        pos = end
    return ids


def case(tok, family, messages, note, sp):
    generation_prompt = messages[-1]["role"] == "user"
    text = render(tok, messages, generation_prompt)
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    assert all(e > s for s, e in offsets), f"a token without characters in {text!r}"
    assert tok.decode(ids) == text or family["tokenizer"] == "mistral", "the encoding does not round-trip"

    # Answer spans (content + end marker), from renders of the conversation up to each answer.
    spans = []
    for k, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prefix = render(tok, messages[:k + 1], False)
        assert text.startswith(prefix), "the template does not render a prefix of the conversation as a prefix"
        content = message["content"].strip() if family["trims"] else message["content"]
        tail = content + family["end_marker"]
        assert prefix.endswith(tail), f"{prefix!r} does not end with the answer {tail!r}"
        spans.append((len(prefix) - len(tail), len(prefix)))
    mask = [int(any(s < b and a < e for a, b in spans)) for s, e in offsets]
    # `auto`'s spans: from the generation prompt's end to the end of the conversation up to the
    # answer (the template's own text, with any space it writes before the answer: Mistral's).
    jinja_spans = []
    for k, message in enumerate(messages):
        if message["role"] == "assistant":
            prompt, answered = render(tok, messages[:k], True), render(tok, messages[:k + 1], False)
            assert answered.startswith(prompt) and text.startswith(answered)
            jinja_spans.append((len(prompt), len(answered)))
    jinja_mask = [int(any(s < b and a < e for a, b in jinja_spans)) for s, e in offsets]
    round_ends = [sum(1 for s, _ in offsets if s < b) for _, b in spans]

    # What `tokenizer.chat_template: auto` must give: apply_chat_template's own tokenisation.
    jinja_ids = tok.apply_chat_template(messages, tokenize=True, return_dict=True,
                                        add_generation_prompt=generation_prompt, date_string=DATE)["input_ids"]
    assert jinja_ids == ids, "apply_chat_template(tokenize=True) differs from encoding its text"

    def ferry_form(t):  # the space after <s>/</s> is the dummy prefix in Ferry's text (see above)
        return t.replace("<s> [INST]", "<s>[INST]").replace("</s> [INST]", "</s>[INST]") \
            if family["tokenizer"] == "mistral" else t
    ferry_text = ferry_form(text)
    if family["tokenizer"] == "mistral":
        users = sum(1 for m in messages if m["role"] == "user")
        assert len(text) - len(ferry_text) == users, "expected one space after <s>/</s> per user turn"
        assert ids == mistral_common_ids(sp, text), "transformers' ids differ from mistral-common's"
    out = {"note": note, "messages": messages, "generation_prompt": generation_prompt, "text": text,
           "ferry_text": ferry_text, "ids": ids, "jinja_ids": jinja_ids, "jinja_mask": jinja_mask, "mask": mask,
           "round_ends": round_ends}
    if not generation_prompt:  # the final answer left open for the model to continue (a prefilled reply)
        continued = tok.apply_chat_template(messages, tokenize=False, continue_final_message=True, date_string=DATE)
        continued_ids = tok.apply_chat_template(messages, tokenize=True, return_dict=True, continue_final_message=True,
                                                date_string=DATE)["input_ids"]
        assert continued_ids == tok(continued, add_special_tokens=False)["input_ids"]
        out.update(continued_text=continued, continued_ferry_text=ferry_form(continued), continued_ids=continued_ids)
    return out


# Text with special tokens followed by text with and without a space, at the start, inside and at
# the end: where transformers 5's LlamaTokenizer puts "▁" depends on tokenizer_config.json's
# `legacy` (true: every stretch between special tokens; false, and absent: only the text's start)
# and add_prefix_space (false: nowhere).
LEGACY_TEXTS = ["hi there", " hi", "  two spaces", "<s>hi", "<s> hi", "<s>  hi", "a</s>b", "a</s> b",
                "<s>[INST] What is 2 + 3? [/INST] 5</s>[INST] And 4?[/INST]", "</s>\nline", "x\n</s>\nhi",
                "<s>", "hi<s>", "hi <s> there", "<s>café 日本</s> naïve", "<s><s>x", "\n<s>"]


def legacy_cases(out, sp_model):
    """For each setting, a SentencePiece folder (tokenizer.model + tokenizer_config.json) and the ids
    transformers' tokenizer(text, add_special_tokens=False) gives for LEGACY_TEXTS."""
    settings = {"legacy_true": {"legacy": True}, "legacy_false": {"legacy": False}, "legacy_absent": {},
                "no_prefix_space": {"legacy": False, "add_prefix_space": False}}
    cases = []
    for name, extra in settings.items():
        folder = out / "sentencepiece" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tokenizer.model").write_bytes(sp_model)
        config = {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                  "add_bos_token": True, **extra}
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
        tok = AutoTokenizer.from_pretrained(str(folder))
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in LEGACY_TEXTS]
        cases.append({"setting": name, "folder": str(folder), "texts": LEGACY_TEXTS, "ids": ids})
    by = {c["setting"]: c["ids"] for c in cases}
    assert by["legacy_true"] != by["legacy_false"] and by["legacy_absent"] == by["legacy_false"]
    return cases


# Rewrites of a real template, for recognition: whether each still renders the same text is decided
# here by rendering it (with and without a tool, where the template takes tools), and Ferry's
# normal form must agree (recognised exactly when it renders the same).
def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    rng = random.Random(20240726)
    convs = conversations()
    chat_text = [m["content"] for c, _ in convs for m in c] * 20
    sentences = split_corpus(corpus_text(rng, 150_000), rng) + chat_text
    tokenizers_by_kind = {kind: build_bpe(kind, sentences) for kind in ("llama3", "qwen2", "smollm2")}
    sp_model = build_sentencepiece(sentences)
    sp = spm.SentencePieceProcessor(model_file=None, model_proto=sp_model)

    result = {"transformers_version": transformers.__version__, "date_string": DATE, "folders": []}
    for jinja_path in sorted(JINJA_DIR.glob("*/*.jinja")):
        template = jinja_path.parent.name
        family = FAMILIES[template]
        jinja = jinja_path.read_text(encoding="utf-8")
        folder = out / jinja_path.stem
        tok = write_folder(folder, family, jinja, tokenizers_by_kind, sp_model)
        if family["tokenizer"] == "mistral":  # both legacy modes of transformers' Llama tokenizer agree
            config = json.loads((folder / "tokenizer_config.json").read_text())
            legacy = AutoTokenizer.from_pretrained(str(folder), legacy=True)
            for messages, _ in convs:
                t = render(tok, messages, messages[-1]["role"] == "user")
                assert legacy(t, add_special_tokens=False)["input_ids"] == tok(t, add_special_tokens=False)["input_ids"]
            assert config["legacy"] is False
        if template == "llama3.2":  # what transformers writes without date_string: today's date
            today = tok.apply_chat_template(convs[1][0], tokenize=False)
            assert "Today Date: " in today
        cases = [case(tok, family, messages, note, sp) for messages, note in convs]
        result["folders"].append({"model": jinja_path.stem, "template": template, "jinja": str(jinja_path),
                                  "folder": str(folder), "cases": cases})

    result["legacy"] = legacy_cases(out, sp_model)
    (out / "cases.json").write_text(json.dumps(result, ensure_ascii=False, indent=1))
    print(f"tokenizer_chat_templates_ref: transformers {transformers.__version__}, {len(result['folders'])} templates "
          f"x {len(convs)} conversations ({', '.join(f['model'] for f in result['folders'])}); "
          f"{time.time() - start:.1f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
