#!/usr/bin/env python3
"""Reference ids for tests/parity/tokenizer_parity_test.cpp, from the Python `sentencepiece` package.

Writes OUTDIR/cases.json:
  - encode: for data/tokenizer.model and two models trained here with other normalisers (Llama's:
    BPE, identity, dummy prefix; the library defaults: unigram, NFKC, whitespace folding), the ids,
    pieces and decoded text of strings that stress tokenisers (Unicode, whitespace runs, digits,
    markers, "", invalid UTF-8) and of seeded random mixes of such characters;
  - conversations: demo-template conversations rendered by hand here and encoded *as one string*
    (not piece by piece as Ferry does), with the loss mask derived from byte offsets: an
    independent check that Ferry's per-piece ids and masks are right;
  - renders: Llama-2-chat and ChatML texts from the official Jinja chat templates.
Texts are stored as hex of their UTF-8 bytes too, so invalid UTF-8 survives the trip.
"""
import io
import json
import pathlib
import sys

import jinja2
import sentencepiece as spm

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO_MODEL = ROOT / "data" / "tokenizer.model"

STRINGS = [
    "",
    " ",
    "   ",
    "hello",
    " hello",
    "hello ",
    "  leading and trailing  ",
    "What is 37 + 48 - 12?",
    "Sort from smallest to largest: 99 20 81 27",
    "1234567890 007 3.14159 -42 1e10",
    "a\nb",
    "\n\n\nthree newlines",
    "tab\tand\r\ncarriage return",
    "many     spaces   between",
    "café naïve résumé Ünïcödé ÅÄÖ",
    "e\u0301 (e + combining acute) vs \u00e9",
    "日本語のテキスト 中文 한국어",
    "emoji 🙂👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "non\u00a0breaking\u2009thin\u200bzero-width",
    "مرحبا بالعالم नमस्ते",
    "<|system|>sys<|end|>\n<|user|>\nhi<|end|>\n<|assistant|>\nok<|end|>",
    "<s>spelled bos</s> <pad> <unk>",
    "<0x41> ▁ ▁▁x",
    "GARDEN nedrag garden Garden gArDeN",
    "x" * 300,
    "The quick brown fox jumps over the lazy dog. " * 4,
]
INVALID_UTF8 = [b"a\xffb", b"\xc3", b"ok\xe2\x82"]

SYSTEM = "You are a careful assistant. Reply with the answer only."
CONVERSATIONS = [
    [("system", SYSTEM), ("user", "What is 37 + 48 - 12?"), ("assistant", "73")],
    [("user", "Spell the word backwards: garden"), ("assistant", "nedrag")],
    [("system", SYSTEM), ("user", "Sort: 5 2 9"), ("assistant", "2 5 9"),
     ("user", "Now the largest?"), ("assistant", "9")],
    [("user", "Unicode: café 日本 🙂"), ("assistant", " spaces  around ")],
    [("user", "empty answer"), ("assistant", "")],
]

# Demo template, spelled out independently of configs/templates/demo.yaml.
DEMO = {"system": ("<|system|>\n", "<|end|>\n"), "user": ("<|user|>\n", "<|end|>\n"),
        "assistant": ("<|assistant|>\n", "<|end|>")}

# Official Jinja templates (Hugging Face tokenizer_config.json of Llama-2-chat; ChatML).
LLAMA2_JINJA = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}")
CHATML_JINJA = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
RENDERS = [
    [("system", SYSTEM), ("user", "What is 2 + 2?"), ("assistant", "4")],
    [("user", "Hi"), ("assistant", "Hello!"), ("user", "Sort: 3 1 2"), ("assistant", "1 2 3")],
    [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello."), ("user", "Bye")],
    [("user", "Only a question")],
]


def train_fixture_model(sentences, **options):
    spm.set_random_generator_seed(7)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=600, byte_fallback=True,
        split_digits=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, character_coverage=1.0, num_threads=1,
        input_sentence_size=0, shuffle_input_sentence=False, hard_vocab_limit=False, minloglevel=2, **options)
    return model.getvalue()


# Normaliser settings of real tokenizers, beyond the demo one (BPE, identity, no dummy prefix):
FIXTURE_MODELS = {
    # Llama / Llama-2 / Mistral: BPE, identity, dummy prefix, whitespace kept.
    "llama_style": dict(model_type="bpe", normalization_rule_name="identity", add_dummy_prefix=True,
                        remove_extra_whitespaces=False),
    # The library defaults (T5-like): unigram, NFKC, dummy prefix, whitespace folded.
    "nfkc_unigram": dict(model_type="unigram"),
}


def random_strings(count, seed=11):
    """Seeded random mixes of the characters tokenisers trip over."""
    import random
    rng = random.Random(seed)
    pool = (list("abcxyzABC0123456789 .,!?-+*/") + [" ", "  ", "\n", "\t", "\r", "\u2581", "\u00a0", "\u3000",
            "\u200b", "\u0301", "\x00", "\x7f", "é", "ß", "ﬁ", "Ω", "日", "本", "語", "한", "ب", "न", "🙂", "👍🏽",
            "👨‍👩‍👧", "１", "ｆ", "<|end|>", "<|user|>", "<s>", "</s>", "<unk>", "<0x41>", "garden", "▁the"])
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 24))) for _ in range(count)]


def encode_cases(sp):
    cases = []
    for raw in [s.encode() for s in STRINGS + random_strings(150)] + INVALID_UTF8:
        ids = sp.encode(raw)
        cases.append({
            "text_hex": raw.hex(),
            "valid_utf8": raw not in INVALID_UTF8,
            "ids": ids,
            "pieces": [sp.id_to_piece(i) for i in ids],
            "decoded_hex": sp.decode(ids).encode().hex(),
        })
    return cases


def decode_cases(sp):
    """Id sequences whose byte pieces are not valid UTF-8 on their own: how decode repairs them."""
    byte = lambda b: sp.piece_to_id(f"<0x{b:02X}>")
    a, space = sp.piece_to_id("a"), sp.piece_to_id("\u2581")
    sequences = [[byte(0xC3)], [byte(0xE6), byte(0x97)], [byte(0xFF)], [byte(0xC3), byte(0xA9)],
                 [a, byte(0xC3), a], [space, a, space], [sp.bos_id(), a, sp.eos_id(), sp.pad_id(), a],
                 [byte(0xF0), byte(0x9F), byte(0x99)], [byte(0xF0), byte(0x9F), byte(0x99), byte(0x82)]]
    return [{"ids": ids, "decoded_hex": sp.decode(ids).encode().hex()} for ids in sequences]


def demo_conversation_case(sp, conversation):
    """Renders with the demo template, encodes the whole text at once, masks by byte offsets."""
    text = b""
    answer_spans = []  # byte ranges of assistant content + end marker
    for role, content in conversation:
        prefix, suffix = DEMO[role]
        text += prefix.encode()
        start = len(text)
        text += content.encode() + suffix.encode()
        if role == "assistant":
            answer_spans.append((start, len(text)))
    proto = sp.encode(text, return_type="proto")
    ids = [sp.bos_id()] + [p.id for p in proto.pieces]
    mask = [0] + [int(any(b <= p.begin and p.end <= e for b, e in answer_spans)) for p in proto.pieces]
    # Round ends: after each assistant end marker, in tokens (+1 for BOS).
    round_ends = [1 + sum(1 for p in proto.pieces if p.end <= e) for _, e in answer_spans]
    return {"messages": [{"role": r, "content": c} for r, c in conversation], "ids": ids, "mask": mask,
            "round_ends": round_ends, "text_hex": text.hex()}


def meta_llama2_case(sp, conversation):
    """Llama-2-chat as Meta's reference code (llama/generation.py) tokenises it: per round
    [BOS] encode("[INST] {user} [/INST] {answer} ") [EOS], the system block inside the first
    user message; a prompt ends with [BOS] encode("[INST] {user} [/INST]"). The loss mask covers
    tokens owning any byte of "{answer} " and the EOS."""
    system = None
    messages = list(conversation)
    if messages[0][0] == "system":
        system = messages.pop(0)[1]
    ids, mask, round_ends = [], [], []
    prompt_ids = None
    for i in range(0, len(messages), 2):
        user = messages[i][1]
        if i == 0 and system is not None:
            user = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + user
        head = f"[INST] {user} [/INST]"
        if i + 1 == len(messages):  # generation prompt
            prompt_ids = ids + [sp.bos_id()] + sp.encode(head)
            break
        text = (head + " " + messages[i + 1][1] + " ").encode()
        answer_start = len((head + " ").encode())
        proto = sp.encode(text, return_type="proto")
        ids += [sp.bos_id()] + [p.id for p in proto.pieces] + [sp.eos_id()]
        mask += [0] + [int(p.end > answer_start) for p in proto.pieces] + [1]
        round_ends.append(len(ids))
    return {"messages": [{"role": r, "content": c} for r, c in conversation], "ids": ids, "mask": mask,
            "round_ends": round_ends, "prompt_ids": prompt_ids}


LLAMA2_CONVERSATIONS = [
    [("system", SYSTEM), ("user", "What is 37 + 48 - 12?"), ("assistant", "73")],
    [("user", "Reverse the order of these words: red cat sun"), ("assistant", "sun cat red"),
     ("user", "How many letters are in the word garden?"), ("assistant", "6")],
    [("system", "Be brief."), ("user", "Sort: 5 2 9"), ("assistant", "2 5 9"), ("user", "café 日本 🙂?")],
]


def render_cases():
    env = jinja2.Environment()
    out = []
    for name, source in (("llama2", LLAMA2_JINJA), ("chatml", CHATML_JINJA)):
        template = env.from_string(source)
        for conversation in RENDERS:
            messages = [{"role": r, "content": c} for r, c in conversation]
            generation_prompt = conversation[-1][0] == "user"
            text = template.render(messages=messages, bos_token="<s>", eos_token="</s>",
                                   add_generation_prompt=generation_prompt)
            out.append({"template": name, "messages": messages, "generation_prompt": generation_prompt,
                        "text": text})
    return out


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    demo = spm.SentencePieceProcessor(model_file=str(DEMO_MODEL))

    sentences = [json.loads(line)["messages"][1]["content"]
                 for line in (ROOT / "data" / "sft_train.jsonl").read_text().splitlines()[:2000]]
    sentences += ["café naïve 日本語 🙂", "The quick brown fox jumps over the lazy dog.", "  two  spaces\n"]
    tokenizers = [{"model": str(DEMO_MODEL), "cases": encode_cases(demo), "decode_cases": decode_cases(demo)}]
    for name, options in FIXTURE_MODELS.items():
        path = out / f"{name}.model"
        path.write_bytes(train_fixture_model(sentences, **options))
        tokenizers.append({"model": str(path), "cases": encode_cases(spm.SentencePieceProcessor(model_file=str(path)))})

    llama_style = spm.SentencePieceProcessor(model_file=tokenizers[1]["model"])
    cases = {
        "sentencepiece_version": spm.__version__,
        "tokenizers": tokenizers,
        "conversations": [demo_conversation_case(demo, c) for c in CONVERSATIONS],
        "renders": render_cases(),
        "llama2": {"model": tokenizers[1]["model"],
                   "cases": [meta_llama2_case(llama_style, c) for c in LLAMA2_CONVERSATIONS]},
    }
    (out / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1))
    print(f"tokenizer_ref: {sum(len(t['cases']) for t in cases['tokenizers'])} encode cases, "
          f"{len(cases['conversations'])} conversations, {len(cases['renders'])} renders -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
