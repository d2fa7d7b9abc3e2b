#!/usr/bin/env python3
"""Reference encodings for tests/parity/tokenizer_bpe_parity_test.cpp, from the Python `tokenizers`
library (the Rust implementation behind Hugging Face's fast tokenizers).

Trains three small byte-level BPE tokenizers on a mixed-text corpus generated here (seeded, ~400 KB)
and saves each as a tokenizer.json configured like a real family:
  - qwen2:  NFC normalizer, Split(Qwen2's regex, Isolated) + ByteLevel(use_regex=False), specials
            <|endoftext|> <|im_start|> <|im_end|>, non-special <tool_call> </tool_call> (as
            Qwen2.5), and a non-special *normalized* token "Ångström" (matched after NFC);
  - llama3: no normalizer, Split(Llama 3's regex) + ByteLevel, ignore_merges, a TemplateProcessing
            post-processor that adds <|begin_of_text|>, specials <|begin_of_text|> <|eot_id|>
            <|start_header_id|> <|end_header_id|>;
  - gpt2:   ByteLevel(add_prefix_space=True, use_regex=True) alone, trim_offsets, a special
            <|endoftext|>, a special <mask> with lstrip (RoBERTa's), a non-special [SEP] with
            rstrip, a non-special single_word "cat-dog";
  - smollm2: Digits(individual_digits) + ByteLevel(use_regex=True), specials <|endoftext|>
            <|im_start|> <|im_end|>;
  - llama3_legacy_merges: llama3 with its merges rewritten in the old "a b" string form;
  - llama3_unk / llama3_byte_fallback: llama3 without the pieces of a few bytes, so that words
            need the unknown token (fused) or <0xNN> byte fallback (and, where a fallback piece is
            missing too, the unknown token);
  - gpt2_splits: gpt2's vocabulary behind Split steps with every behavior, a String pattern,
            invert, and Digits in runs.
For each tokenizer and each of >= 2,000 strings (stored as hex of UTF-8 too): ids with special
tokens matched (the library default; Ferry's encode_with_control_pieces), ids with
`encode_special_tokens = True` (Ferry's encode), byte offsets of both, and
decode(ids, skip_special_tokens=True); plus decodes of id sequences cut anywhere (invalid UTF-8).

Writes OUTDIR/<name>.tokenizer.json and OUTDIR/cases.json.
"""
import json
import os
import pathlib
import random
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # deterministic training, and no thread pool to start
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")

# --- text ------------------------------------------------------------------------------------

EN = ("the of and to in is that it was for on are with as his they be at one have this from or had by "
      "hot word but what some we can out other were all there when up use your how said an each she which "
      "do their time if will way about many then them write would like so these her long make thing see him "
      "two has look more day could go come did number sound no most people my over know water than call "
      "first who may down side been now find any new work part take get place made live where after back "
      "little only round man year came show every good me give our under name very through just form "
      "sentence great think say help low line differ turn cause much mean before move right boy old too "
      "same tell does set three want air well also play small end put home read hand port large spell add "
      "even land here must big high such follow act why ask men change went light kind off need house "
      "picture try us again animal point mother world near build self earth father tokenizer merges "
      "vocabulary training gradient optimizer checkpoint don't can't I'm you're we've they'll she'd it's "
      "DON'T WE'RE I'LL HE'S Ferry's model's").split()
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "if x != None and y >= 3:\n        print(f\"{x=} {y!r}\")\n", "const auto& [key, value] = *it;  // C++17\n",
        "SELECT id, name FROM users WHERE age > 21;\r\n", "<div class=\"row\">&nbsp;</div>\n",
        "x = {'a': [1, 2, 3], \"b\": (4.5e-3, -7)}\n", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }\n",
        "$ ls -la | grep '\\.py$' && echo \"done\" >> log.txt\n", "#include <vector>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
        "    elif token == '<|im_end|>':\n        break\n", "s.replace(\"\\r\\n\", \"\\n\").strip()\n",
        "λx. x + 1  // lambda\n", "assert len(ids) == 3, 'three ids'\n"]
CJK = list("的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过"
           "家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从") + \
      ["日本語", "東京", "こんにちは", "ありがとう", "カタカナ", "ひらがな", "한국어", "안녕하세요", "서울", "中文", "北京"]
ARABIC = ["مرحبا", "بالعالم", "كتاب", "السلام", "عليكم", "اللغة", "العربية", "شكرا", "مدرسة", "٣٤٥"]
OTHER = ["नमस्ते", "हिन्दी", "Привет", "мир", "Ελληνικά", "γειά", "שלום", "ไทย", "Tiếng", "Việt",
         "café", "naïve", "résumé", "Ünïcödé", "ÅÄÖ", "straße", "ﬁne", "Ωmega", "ℌilbert", "Ａｂｃ"]
EMOJI = ["🙂", "👍🏽", "👨‍👩‍👧", "👩🏾‍💻", "🏳️‍🌈", "🇫🇷", "🇯🇵", "❤️", "✨", "🎉", "🧑‍🤝‍🧑", "😀😃😄", "🐍", "🤗"]
# Decomposed forms that NFC composes (and a singleton: U+212B ANGSTROM SIGN -> U+00C5), Hangul jamo,
# combining marks in non-canonical order, a lone combining mark.
DECOMPOSED = ["e\u0301", "cafe\u0301", "A\u030angstro\u0308m", "\u212bngstr\u00f6m", "\u00c5ngstr\u00f6m",
              "Ångström", "n\u0303", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
              "a\u0301\u0328", "a\u0328\u0301", "o\u0308\u0304", "\u0301start", "x\u0323\u0307", "\u1e0b\u0323",
              "\u0958", "\u2126", "Å", "q\u0307\u0323"]
DIGITS = ["0", "7", "42", "123", "2024", "31415", "1234567", "000001", "3.14159", "1,000,000", "٣٤٥", "１２３",
          "Ⅻ", "½", "²"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n ", "\u00a0", "\u3000", "\u2009",
          "\u200b", "\u2028", "\u0085", "\x0b", "\x0c", "    \n", "\n   "]
# Words glued from two others: llama3's vocabulary gets them whole (see add_unmergeable_words).
GLUED = [a + b for a, b in zip(EN[3:200:3], EN[5:200:3])]
PUNCT = list(".,;:!?-()[]{}\"'`~@#$%^&*+=/\\|<>_") + ["...", "--", "—", "–", "«", "»", "“", "”", "’", "¿", "¡", "…"]


def corpus_text(rng, n_chars):
    """Mixed text for training: English-heavy, with code, CJK, other scripts, numbers, emoji."""
    parts, size = [], 0
    while size < n_chars:
        kind = rng.random()
        if kind < 0.55:
            words = [rng.choice(EN) for _ in range(rng.randint(4, 18))]
            if rng.random() < 0.3:
                words[0] = words[0].capitalize()
            text = " ".join(words) + rng.choice([". ", ".\n", "? ", "! ", ", ", ".\n\n", ": "])
        elif kind < 0.7:
            text = rng.choice(CODE)
        elif kind < 0.8:
            text = "".join(rng.choice(CJK) for _ in range(rng.randint(3, 20))) + rng.choice(["。", "、", "！", "\n"])
        elif kind < 0.86:
            text = " ".join(rng.choice(ARABIC + OTHER) for _ in range(rng.randint(2, 8))) + "\n"
        elif kind < 0.93:
            text = " ".join(rng.choice(DIGITS + EN) for _ in range(rng.randint(2, 8))) + " "
        else:
            text = rng.choice(EMOJI) + " " + rng.choice(EN) + rng.choice(SPACES)
        parts.append(text)
        size += len(text)
    return "".join(parts)


def split_corpus(text, rng):
    """Training sentences: the corpus cut into lines of varying length."""
    out, pos = [], 0
    while pos < len(text):
        n = rng.randint(40, 400)
        out.append(text[pos:pos + n])
        pos += n
    return out


SPECIAL_TEXT = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>",
                "<|start_header_id|>", "<|end_header_id|>", "<mask>", "[SEP]", "<tool_call>", "</tool_call>",
                "cat-dog", "Ångström", "A\u030angstro\u0308m", "<|im_", "_end|>", "<|", "|>", "<mask", "SEP]"]

HANDWRITTEN = [
    "", " ", "  ", "\n", "\r\n", "\t", "a", "hello", " hello", "hello ", "Hello world!", "  leading and trailing  ",
    "What is 37 + 48 - 12?", "1234567890", "12345678901234567890", "3.14159 -42 1e10 0x1F", "a\nb", "\n\n\nthree",
    "tab\tand\r\ncarriage return\r\n", "many     spaces   between", "trailing spaces   ", "   \n  \n",
    "I'm sure you're right, they've said it's OK. I'LL DO IT, DON'T worry. She'd've", "'s 't 're 've 'm 'll 'd",
    "café naïve résumé Ünïcödé ÅÄÖ", "e\u0301 (e + combining acute) vs \u00e9", "cafe\u0301 and caf\u00e9",
    "A\u030angstro\u0308m \u212bngstr\u00f6m Ångström", "\u1100\u1161\u11a8 \uac01", "a\u0328\u0301 a\u0301\u0328",
    "日本語のテキスト 中文 한국어", "東京は日本の首都です。", "emoji 🙂👍🏽 family 👨‍👩‍👧 flag 🇫🇷🇯🇵 🏳️‍🌈",
    "👩🏾‍💻👩🏾‍💻👩🏾‍💻", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "non\u00a0breaking\u2009thin\u200bzero-width\u3000ideographic",
    "مرحبا بالعالم ٣٤٥ नमस्ते", "Привет, мир! Ελληνικά שלום", "def f(x):\n    return x * 2\n",
    "if (a != b) { return -1; }\r\n", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "text <|endoftext|> more",
    "<|im_end|><|im_end|>", "<|im_end", "<|im_start|><|im_end|>x", "a <mask> b", "a    <mask>    b", "<mask>",
    " <mask>", "<mask> ", "x[SEP]   y", "[SEP]", "a [SEP]\n\nb", "cat-dog", "a cat-dog b", "cat-dogs", "hotcat-dog",
    "cat-dog_", "(cat-dog)", "<tool_call>{\"name\": \"f\"}</tool_call>", "x<tool_call>y", "\u0301", "\u0301\u0301a",
    "x" * 300, "The quick brown fox jumps over the lazy dog. " * 4, "ab" * 100, "\n" * 20, " " * 33, "!!!???...",
    "\u2028line\u2029para\u0085nel", "\x0bvt\x0cff", "\x00nul\x7fdel\x01", "__init__", "snake_case_name", "CamelCaseName",
    "q日本 zq日 qq qzq 🙂q", "http://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Users\\name\\file.txt", "100%", "$5.99", "½ ² Ⅻ",
]


def random_strings(rng, count):
    pool_words = EN + GLUED + CJK + ARABIC + OTHER + EMOJI + DECOMPOSED + DIGITS + PUNCT + SPECIAL_TEXT
    out = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.25:  # words and separators
            pieces = []
            for _ in range(rng.randint(1, 14)):
                pieces.append(rng.choice(pool_words))
                pieces.append(rng.choice(SPACES + [" "] * 12 + [""] * 4 + PUNCT[:6]))
            text = "".join(pieces)
        elif kind < 0.45:  # characters from everything, any order
            chars = "".join(pool_words + SPACES + PUNCT)
            text = "".join(rng.choice(chars) for _ in range(rng.randint(1, 40)))
        elif kind < 0.6:  # whitespace and digit runs
            text = "".join(rng.choice(SPACES + DIGITS + ["a", "b", "x", "'s", "'LL"]) for _ in range(rng.randint(1, 20)))
        elif kind < 0.72:  # code
            text = "".join(rng.choice(CODE) for _ in range(rng.randint(1, 3)))
            if rng.random() < 0.5:
                text = text.replace("\n", "\r\n")
        elif kind < 0.85:  # special-token text embedded in user text
            pieces = [rng.choice(EN + SPACES + CJK + EMOJI) for _ in range(rng.randint(1, 6))]
            for _ in range(rng.randint(1, 3)):
                pieces.insert(rng.randint(0, len(pieces)), rng.choice(SPECIAL_TEXT) + rng.choice(["", " ", "  ", "\n", "\t "]))
            text = "".join(pieces)
        else:  # decomposed forms and marks around letters
            text = "".join(rng.choice(DECOMPOSED + ["a", "e", "o", " ", "\u0301", "\u0308", "\u0323", "\u11a8", "\u1161"])
                           for _ in range(rng.randint(1, 12)))
        out.append(text)
    return out


# --- tokenizers ------------------------------------------------------------------------------

def train(tokenizer, sentences, vocab_size, special_tokens):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=special_tokens, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(sentences, trainer)
    return tokenizer


def build_qwen2(sentences):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tok, sentences, 2000, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False),
                    AddedToken("</tool_call>", special=False, normalized=False),
                    AddedToken("A\u030angstro\u0308m", special=False, normalized=True)])
    return tok


def build_llama3(sentences):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]
    train(tok, sentences, 2500, specials)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def build_gpt2(sentences):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    train(tok, sentences, 1500, ["<|endoftext|>"])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    tok.add_tokens([AddedToken("[SEP]", rstrip=True, special=False, normalized=False),
                    AddedToken("cat-dog", single_word=True, special=False)])
    return tok


def build_smollm2(sentences):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tok, sentences, 2000, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return tok


def reloaded(path):
    """The tokenizer as the saved file defines it: what Ferry reads."""
    return Tokenizer.from_file(str(path))


def add_unmergeable_words(path):
    """Sets ignore_merges (the trainer does not carry it over) and, as in Llama 3's vocabulary
    (converted from tiktoken), adds whole words that the merges would split: with ignore_merges such
    a pre-token is one token, without it several."""
    data = json.loads(path.read_text())
    data["model"]["ignore_merges"] = True
    vocab = data["model"]["vocab"]
    tok = Tokenizer.from_str(json.dumps(data))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    next_id = max(max(vocab.values()), max(t["id"] for t in data["added_tokens"])) + 1
    for word in GLUED + OTHER + ["tokenization", "vocabularies", "Ferry", "ferry", "日本語", "こんにちは"]:
        for text in (word, " " + word):
            piece = byte_level.pre_tokenize_str(text)[0][0]
            if piece not in vocab and len(tok.model.tokenize(piece)) > 1:
                vocab[piece] = next_id
                next_id += 1
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1))


def gpt2_byte_chars():
    """GPT-2's bytes_to_unicode: byte -> the character ByteLevel spells it with."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(0x100 + extra)
            extra += 1
    return chars


def without_bytes(path_in, path_out, removed, unk_token, fuse_unk, byte_fallback, fallback_missing=()):
    """A copy whose vocabulary lacks the pieces holding `removed` bytes (and the merges that use
    them), so words with those bytes need the unknown token or <0xNN> byte fallback pieces."""
    data = json.loads(pathlib.Path(path_in).read_text())
    model = data["model"]
    chars = gpt2_byte_chars()
    gone = {chars[b] for b in removed}
    vocab = {p: i for p, i in model["vocab"].items() if not gone.intersection(p)}
    model["merges"] = [m for m in model["merges"] if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    next_id = max(model["vocab"].values()) + 1
    if unk_token:
        vocab[unk_token] = next_id
        next_id += 1
    if byte_fallback:
        for b in range(256):
            if b not in fallback_missing:
                vocab[f"<0x{b:02X}>"] = next_id
                next_id += 1
    model.update(vocab=vocab, unk_token=unk_token, fuse_unk=fuse_unk, byte_fallback=byte_fallback)
    pathlib.Path(path_out).write_text(json.dumps(data, ensure_ascii=False, indent=1))


def with_split_behaviors(path_in, path_out):
    """A copy pre-tokenizing with every Split behavior, a String pattern and invert."""
    data = json.loads(pathlib.Path(path_in).read_text())
    split = lambda pattern, behavior, invert=False: {"type": "Split", "pattern": pattern, "behavior": behavior,
                                                     "invert": invert}
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        split({"String": "-"}, "MergedWithPrevious"),
        split({"Regex": r"\s+"}, "MergedWithNext"),
        split({"Regex": r"\p{N}"}, "Contiguous"),
        {"type": "Digits", "individual_digits": False},
        split({"Regex": r"[.,!?]"}, "Removed"),
        split({"Regex": r"[a-z]+"}, "Isolated", True),
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": False}]}
    pathlib.Path(path_out).write_text(json.dumps(data, ensure_ascii=False, indent=1))


def char_to_byte_offsets(text):
    table, pos = [0], 0
    for ch in text:
        pos += len(ch.encode())
        table.append(pos)
    return table


def encode_case(tok, text, table):
    out = {}
    for mode, flag in (("control", False), ("plain", True)):
        tok.encode_special_tokens = flag
        enc = tok.encode(text, add_special_tokens=False)
        out[mode + "_ids"] = enc.ids
        out[mode + "_offsets"] = [[table[b], table[e]] for b, e in enc.offsets]
    tok.encode_special_tokens = False
    out["decoded_hex"] = tok.decode(out["control_ids"], skip_special_tokens=True).encode().hex()
    return out


def decode_cases(tok, rng, encodings, count):
    """Id sequences cut at arbitrary points (multi-byte characters split) and random ids."""
    vocab = tok.get_vocab_size(with_added_tokens=True)
    cases = []
    nonempty = [ids for ids in encodings if ids]
    for i in range(count):
        if i % 3 == 2:
            ids = [rng.randrange(vocab) for _ in range(rng.randint(1, 12))]
        else:
            ids = rng.choice(nonempty)
            a = rng.randrange(len(ids))
            ids = ids[a:a + rng.randint(1, 6)]
        cases.append({"ids": ids, "decoded_hex": tok.decode(ids, skip_special_tokens=True).encode().hex()})
    return cases


def rewrite_merges_legacy(path_in, path_out):
    data = json.loads(pathlib.Path(path_in).read_text())
    merges = data["model"]["merges"]
    assert merges and isinstance(merges[0], list), "expected the array form of merges"
    data["model"]["merges"] = [" ".join(pair) for pair in merges]
    pathlib.Path(path_out).write_text(json.dumps(data, ensure_ascii=False, indent=1))


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    rng = random.Random(20240611)
    sentences = split_corpus(corpus_text(rng, 400_000), rng)

    paths = {}
    for name, build in (("qwen2", build_qwen2), ("llama3", build_llama3), ("gpt2", build_gpt2),
                        ("smollm2", build_smollm2)):
        path = out / f"{name}.tokenizer.json"
        build(sentences).save(str(path))
        paths[name] = path
    add_unmergeable_words(paths["llama3"])
    paths["llama3_legacy_merges"] = out / "llama3_legacy_merges.tokenizer.json"
    rewrite_merges_legacy(paths["llama3"], paths["llama3_legacy_merges"])
    # Bytes the vocabulary loses: 'q', 'z', the lead byte of most CJK characters, emoji's 0xF0.
    removed = [ord("q"), ord("z"), 0xE6, 0xF0]
    paths["llama3_unk"] = out / "llama3_unk.tokenizer.json"
    without_bytes(paths["llama3"], paths["llama3_unk"], removed, "<unk>", True, False)
    paths["llama3_byte_fallback"] = out / "llama3_byte_fallback.tokenizer.json"
    # No <0x71> either: 'q' falls to the unknown token, and a pending unknown token comes after the
    # fallback pieces of what follows it in the word ("q日"), as in the Rust loop.
    without_bytes(paths["llama3"], paths["llama3_byte_fallback"], removed + [0x9F], "<unk>", False, True,
                  fallback_missing=[0x71])
    paths["gpt2_splits"] = out / "gpt2_splits.tokenizer.json"
    with_split_behaviors(paths["gpt2"], paths["gpt2_splits"])

    strings = HANDWRITTEN + random_strings(random.Random(7), 2000)
    strings += [s for s in sentences[:100]]  # training text itself (long words the merges know)
    tables = [char_to_byte_offsets(s) for s in strings]

    result = {"library_version": tokenizers.__version__,
              "texts_hex": [s.encode().hex() for s in strings], "files": []}
    for name, path in paths.items():
        tok = reloaded(path)
        cases = [encode_case(tok, s, t) for s, t in zip(strings, tables)]
        with_bos = tok.encode("hi", add_special_tokens=True).ids
        plain_bos = tok.encode("hi", add_special_tokens=False).ids
        leading = with_bos[0] if len(with_bos) > len(plain_bos) else None
        specials = sorted((t.content, i) for i, t in tok.get_added_tokens_decoder().items() if t.special)
        vocab = tok.get_vocab(with_added_tokens=True)
        pieces = sorted(vocab.items(), key=lambda kv: kv[1])
        entry = {"name": name, "path": str(path), "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                 "max_id_plus_one": max(vocab.values()) + 1, "leading_special_id": leading,
                 "special_tokens": [[c, i] for c, i in specials],
                 "pieces": [[p, i] for p, i in pieces[:: max(1, len(pieces) // 300)]],
                 "cases": cases,
                 "decode_cases": decode_cases(tok, random.Random(3), [c["control_ids"] for c in cases], 300)}
        if name == "llama3":
            # ignore_merges must matter on this fixture, or the test would not check it.
            data = json.loads(path.read_text())
            data["model"]["ignore_merges"] = False
            without = Tokenizer.from_str(json.dumps(data))
            differ = sum(without.encode(s, add_special_tokens=False).ids != c["control_ids"] for s, c in zip(strings, cases))
            assert differ > 0, "ignore_merges changes no encoding: the fixture does not exercise it"
            entry["strings_ignore_merges_changes"] = differ
        if name == "qwen2":
            changed = sum(normalizers.NFC().normalize_str(s) != s for s in strings)
            assert changed > 50, "too few strings that NFC changes"
        result["files"].append(entry)

    (out / "cases.json").write_text(json.dumps(result, ensure_ascii=False))
    summary = ", ".join(f"{t['name']} (vocab {t['vocab_size']})" for t in result["files"])
    print(f"tokenizer_bpe_ref: tokenizers {tokenizers.__version__}, {len(strings)} strings x "
          f"{len(result['files'])} tokenizers: {summary}; "
          f"ignore_merges changes {result['files'][1]['strings_ignore_merges_changes']} llama3 encodings; "
          f"{time.time() - start:.1f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
