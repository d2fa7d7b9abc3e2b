#!/usr/bin/env python3
"""Writes Ferry's demo datasets and the SentencePiece tokenizer trained on them, under data/.

The demo task is *verifiable*: every problem (integer arithmetic, sorting, picking the largest or
smallest number, reversing words or letters, capitalising, counting letters) has exactly one
correct short answer, so SFT accuracy, reward-model accuracy and PPO's gain are measured exactly
by string comparison instead of eyeballed. Answers are a few tokens long so that a tiny model
trained on a CPU for minutes can learn some of them.

Everything is seeded and single-threaded: running the script twice writes byte-identical files.

    ~/.cache/ferry/venv/bin/python scripts/make_demo_data.py [--out data]

See data/README.md for the file formats and the task definition.
"""
import argparse
import hashlib
import io
import json
import pathlib
import random
import sys

SEED = 20240601
SYSTEM_PROMPT = "You are a careful assistant. Reply with the answer only."

# Sizes of each file (number of jsonl lines). sft_train is large so that the demo SFT run
# (configs/demo-sft.yaml) sees each conversation about once instead of memorising a few thousand.
SIZES = {
    "sft_train": 40000,
    "sft_eval": 200,
    "preference_train": 2000,
    "preference_eval": 200,
    "prompts_train": 1000,
    "prompts_eval": 200,
}
# More preference pairs for the reward model, drawn after every file above (so those files and the
# tokenizer, which learns from them, stay as they were): preference_train_large.jsonl holds
# preference_train's pairs followed by these. 2000 pairs are too few for the demo reward model to
# generalise to the held-out problems.
EXTRA_PREFERENCE_PAIRS = 20000
# In that many of the extra pairs (one in OFF_PROMPT_EVERY) the rejected answer is not a near miss
# but the right answer to another problem of the same kind: well-formed, and unrelated to the
# prompt. That is the demo SFT model's own commonest mistake (it answers "winter" when asked to
# capitalise "father", 64 for the largest of 61 52 43), so a reward model that PPO optimises
# against must learn to rank it low; near misses alone do not teach that (scored on the SFT
# model's wrong answers, a reward model trained on near misses only preferred them to the right
# ones 64% of the time). Drawn from their own generator, so the problems stay as they were.
OFF_PROMPT_EVERY = 2

# Chat template markers (configs/templates/demo.yaml); each is one user-defined token.
TEMPLATE_MARKERS = ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
VOCAB_SIZE = 2000

# Common short lowercase words, no palindromes and no repeated entries (checked below).
WORDS = """
apple bread chair dog earth field garden house island jacket kite lemon money night orange
paper queen river stone table uncle voice water yellow zebra animal basket candle doctor engine
forest guitar hammer insect jungle kitchen ladder marble needle ocean pencil rabbit silver tiger
umbrella valley window butter cloud dream eagle flower grape honey iron juice king light mountain
nest olive piano quiet rain sun tree violin winter yard blue green red black white brown purple
small large happy sad fast slow warm cold early late music story horse mouse sheep goat camel
snake whale shark spider turtle monkey panda cherry peach melon bean carrot onion potato tomato
pepper salt sugar milk cheese coffee bottle spoon plate glass mirror clock lamp door wall floor
roof road bridge train plane boat ship truck wheel rocket planet star moon comet storm snow wind
sand shell coral pearl gold copper metal wood brick glue rope chain ring crown sword shield arrow
castle tower village city market school library office hospital farm circle square triangle line
point number letter word book page chapter poem song dance game puzzle answer question friend
family mother father sister brother child teacher student baker farmer pilot sailor painter
""".split()

LETTERS = "abcdefghijklmnopqrstuvwxyz"


# --- Problems ----------------------------------------------------------------------------------
# A problem is (kind, user text, answer, rejected answer maker). The rejected answer is a
# plausible near miss (off by one, one swap, second largest) so that a reward model has to read
# the problem to rank the pair, not just recognise the answer's shape.


def near_number(rng, answer):
    """A wrong non-negative integer close to `answer` (off by one or two, or a tens slip)."""
    candidates = [answer + d for d in (-2, -1, 1, 2, -10, 10) if answer + d >= 0]
    return str(rng.choice(candidates))


def swap_adjacent(rng, items):
    """`items` with one adjacent pair of different elements swapped (items must not be uniform)."""
    positions = [i for i in range(len(items) - 1) if items[i] != items[i + 1]]
    i = rng.choice(positions)
    out = list(items)
    out[i], out[i + 1] = out[i + 1], out[i]
    return out


def problem_add_sub(rng):
    while True:
        terms = [rng.randint(1, 99) for _ in range(rng.choice((2, 3)))]
        ops = [rng.choice("+-") for _ in range(len(terms) - 1)]
        value = terms[0]
        ok = True
        for op, t in zip(ops, terms[1:]):
            value = value + t if op == "+" else value - t
            ok = ok and value >= 0  # keep every partial result non-negative
        if ok:
            break
    expr = str(terms[0]) + "".join(f" {op} {t}" for op, t in zip(ops, terms[1:]))
    return f"What is {expr}?", str(value), lambda: near_number(rng, value)


def problem_mul_add(rng):
    a, b, c = rng.randint(2, 12), rng.randint(2, 9), rng.randint(1, 30)
    if rng.random() < 0.5 or a * b < c:
        text, value = f"What is {a} * {b} + {c}?", a * b + c
    else:
        text, value = f"What is {a} * {b} - {c}?", a * b - c
    return text, str(value), lambda: near_number(rng, value)


def problem_sort(rng):
    numbers = rng.sample(range(100), rng.choice((3, 4, 5)))
    answer = sorted(numbers)
    text = "Sort from smallest to largest: " + " ".join(map(str, numbers))
    return text, " ".join(map(str, answer)), lambda: " ".join(map(str, swap_adjacent(rng, answer)))


def problem_extreme(rng):
    numbers = rng.sample(range(100), rng.choice((3, 4, 5)))
    ordered = sorted(numbers)
    if rng.random() < 0.5:
        text, answer, wrong = "Which number is the largest: ", ordered[-1], ordered[-2]
    else:
        text, answer, wrong = "Which number is the smallest: ", ordered[0], ordered[1]
    return text + " ".join(map(str, numbers)), str(answer), lambda: str(wrong)


def problem_reverse_words(rng):
    words = rng.sample(WORDS, rng.choice((3, 4)))
    answer = list(reversed(words))

    def rejected():
        return " ".join(words if rng.random() < 0.3 else swap_adjacent(rng, answer))

    return "Reverse the order of these words: " + " ".join(words), " ".join(answer), rejected


def problem_reverse_letters(rng):
    word = rng.choice(WORDS)
    answer = word[::-1]

    def rejected():
        return word if rng.random() < 0.3 else "".join(swap_adjacent(rng, list(answer)))

    return f"Spell the word backwards: {word}", answer, rejected


def problem_uppercase(rng):
    word = rng.choice(WORDS)
    answer = word.upper()

    def rejected():
        if rng.random() < 0.3:
            return word.capitalize()
        i = rng.randrange(len(word))
        return answer[:i] + word[i] + answer[i + 1:]

    return f"Write the word in capital letters: {word}", answer, rejected


def problem_count_letters(rng):
    word = rng.choice(WORDS)
    n = len(word)
    return f"How many letters are in the word {word}?", str(n), lambda: str(n + rng.choice((-1, 1)))


def problem_count_char(rng):
    word = rng.choice(WORDS)
    letter = rng.choice(sorted(set(word)))
    n = word.count(letter)
    return (f"How many times does the letter {letter} appear in {word}?", str(n),
            lambda: str(n + 1 if n == 1 or rng.random() < 0.5 else n - 1))


# (name, generator, weight). Arithmetic and ordering dominate: they are the most learnable.
KINDS = [
    ("add_sub", problem_add_sub, 4),
    ("mul_add", problem_mul_add, 2),
    ("sort", problem_sort, 3),
    ("extreme", problem_extreme, 2),
    ("reverse_words", problem_reverse_words, 2),
    ("reverse_letters", problem_reverse_letters, 1),
    ("uppercase", problem_uppercase, 1),
    ("count_letters", problem_count_letters, 1),
    ("count_char", problem_count_char, 1),
]


class ProblemSource:
    """Draws problems; eval problems never reappear in any training file.

    Eval files are drawn first and their user texts reserved. Training files reject reserved
    texts and avoid repeats within a file (the small word tasks may repeat after 200 tries).
    """

    def __init__(self, rng):
        self.rng = rng
        self.reserved = set()  # user texts of eval problems

    def draw(self, seen, is_eval):
        names = [k[0] for k in KINDS]
        weights = [k[2] for k in KINDS]
        for attempt in range(200):
            kind = self.rng.choices(range(len(KINDS)), weights=weights)[0]
            text, answer, rejected = KINDS[kind][1](self.rng)
            if text in self.reserved and not is_eval:
                continue
            if text in seen and (is_eval or attempt < 150):
                continue
            seen.add(text)
            if is_eval:
                self.reserved.add(text)
            return names[kind], text, answer, rejected
        raise RuntimeError("could not draw a fresh problem; widen the problem space")


def system(content):
    return {"role": "system", "content": content}


def user(content):
    return {"role": "user", "content": content}


def assistant(content):
    return {"role": "assistant", "content": content}


def make_file(source, name, count, off_prompt_rng=None):
    is_eval = name.endswith("_eval")
    seen = set()
    rows = []
    answers_by_kind = {}  # answers drawn so far, for off-prompt rejected answers
    for _ in range(count):
        kind, text, answer, rejected = source.draw(seen, is_eval)
        context = [system(SYSTEM_PROMPT), user(text)]
        if name.startswith("sft"):
            rows.append({"messages": context + [assistant(answer)]})
        elif name.startswith("preference"):
            wrong = rejected()
            if off_prompt_rng is not None:
                others = [a for a in answers_by_kind.get(kind, []) if a != answer]
                if others and off_prompt_rng.randrange(OFF_PROMPT_EVERY) == 0:
                    wrong = off_prompt_rng.choice(others)
                answers_by_kind.setdefault(kind, []).append(answer)
            assert wrong != answer, (text, answer, wrong)
            rows.append({"context": context, "chosen": [assistant(answer)], "rejected": [assistant(wrong)],
                         "kind": kind})
        else:
            rows.append({"messages": context, "gt_answer": answer, "kind": kind})
    return rows


def dump_jsonl(rows):
    # Compact separators: sft_train stays under 8 MiB (the repository's limit for a tracked file).
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=False, separators=(",", ":")) + "\n" for r in rows)


def training_sentences(files):
    """Text the tokenizer learns from: every message of the training files, one per line."""
    lines = []
    for name in ("sft_train", "preference_train", "prompts_train"):
        for row in files[name]:
            for key in ("messages", "context", "chosen", "rejected"):
                for m in row.get(key, []):
                    lines.append(m["content"])
    # The markers once with the text around them, so their neighbours are seen in context.
    lines.append("".join(TEMPLATE_MARKERS))
    return lines


def train_tokenizer(sentences):
    import sentencepiece as spm

    spm.set_random_generator_seed(SEED)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        model_type="bpe",  # as Llama's tokenizer
        vocab_size=VOCAB_SIZE,
        character_coverage=1.0,
        split_digits=True,  # each digit its own token: arithmetic stays learnable
        byte_fallback=True,  # any UTF-8 input encodes (as <0xNN> pieces), never <unk>
        normalization_rule_name="identity",  # text in == text out; no NFKC folding
        remove_extra_whitespaces=False,  # keep whitespace runs and newlines
        add_dummy_prefix=False,  # templates tokenise pieces separately; no spurious "▁"
        user_defined_symbols=TEMPLATE_MARKERS + ["\n"],
        unk_id=0, bos_id=1, eos_id=2, pad_id=3,
        unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>", pad_piece="<pad>",
        num_threads=1,  # determinism
        input_sentence_size=0,  # use every sentence, no random sampling
        shuffle_input_sentence=False,
        hard_vocab_limit=False,  # the corpus is small: allow a smaller vocabulary than asked
        minloglevel=2,
    )
    return model.getvalue()


def check_tokenizer(model_bytes):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    for marker in TEMPLATE_MARKERS:
        ids = sp.encode(marker)
        assert len(ids) == 1, f"{marker} is not one token: {ids}"
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (0, 1, 2, 3)
    assert sp.encode("123") == [sp.piece_to_id(d) for d in "123"], "digits must split"
    return sp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent.parent / "data"))
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    assert len(set(WORDS)) == len(WORDS), "duplicate word in WORDS"
    assert all(w != w[::-1] for w in WORDS), "palindrome in WORDS"

    rng = random.Random(SEED)
    source = ProblemSource(rng)
    files = {}
    # Eval first: their problems are reserved so no training file contains them.
    for name in sorted(SIZES, key=lambda n: not n.endswith("_eval")):
        files[name] = make_file(source, name, SIZES[name])

    outputs = {f"{name}.jsonl": dump_jsonl(rows).encode() for name, rows in files.items()}
    extra = make_file(source, "preference_train_extra", EXTRA_PREFERENCE_PAIRS, random.Random(SEED + 1))
    outputs["preference_train_large.jsonl"] = dump_jsonl(files["preference_train"] + extra).encode()
    model = train_tokenizer(training_sentences(files))
    sp = check_tokenizer(model)
    outputs["tokenizer.model"] = model

    for name in sorted(outputs):
        (out / name).write_bytes(outputs[name])
        digest = hashlib.sha256(outputs[name]).hexdigest()[:16]
        print(f"{name:26s} {len(outputs[name]):9d} bytes  sha256 {digest}")
    print(f"tokenizer vocab size {sp.vocab_size()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
