#!/usr/bin/env python3
"""Writes Ferry's demo datasets under data/ (the SentencePiece tokenizer there is kept as it is).

The demo task is *verifiable*: every problem (adding digits, picking the largest or smallest,
sorting, reversing, counting) has exactly one correct short answer, so SFT accuracy, reward-model
accuracy and the RL stages' gain are measured exactly by string comparison instead of eyeballed.
Numbers are single digits, one token each, so a tiny model trained on a CPU for a minute or two
learns the ordering and copying tasks.

The demonstrations are deliberately imperfect, as human ones are: in SLIP_RATE of the sort
demonstrations in the SFT files the "labeler" slipped and sorted largest first. The SFT model
imitates that habit; the preference pairs, which rank the right answer above the slip, teach the
reward model what was asked, and RL (PPO against the reward model, or GRPO against a verifier)
has something to fix. Preference and prompt files always carry the right answer.

Everything is seeded and single-threaded: running the script twice writes byte-identical files.

    ~/.cache/ferry/venv/bin/python scripts/make_demo_data.py [--out data]

See data/README.md for the file formats and the task definition.
"""
import argparse
import hashlib
import json
import pathlib
import random
import sys

SEED = 20240601
SYSTEM_PROMPT = "You are a careful assistant. Reply with the answer only."

# Sizes of each file (number of jsonl lines). sft_train is large so that the demo SFT run
# (configs/demo-sft.yaml) sees each conversation about once instead of memorising a few thousand.
# prompts_eval is large so that exact match moves in steps of 0.1 points, not 0.5.
SIZES = {
    "sft_train": 38000,
    "sft_eval": 200,
    "preference_train": 2000,
    "preference_eval": 200,
    "prompts_train": 2000,
    "prompts_eval": 1000,
}
# Files whose problems are reserved: no other file contains them. The prompt files are reserved
# too, so the RL stages learn from problems the SFT model never saw.
RESERVED = ("sft_eval", "preference_eval", "prompts_eval", "prompts_train")
# More preference pairs for the reward model, drawn after every file above: preference_train_large
# holds preference_train's pairs followed by these.
EXTRA_PREFERENCE_PAIRS = 20000
# In that many of the extra pairs (one in OFF_PROMPT_EVERY) the rejected answer is not a near miss
# but the right answer to another problem of the same kind: well-formed, and unrelated to the
# prompt, so that the reward model must read the prompt rather than judge an answer's shape.
OFF_PROMPT_EVERY = 2
# Fraction of sort demonstrations (SFT files) that show the labeler's slip (largest first) instead
# of the right answer. Above one half, the SFT model's most likely answer is the slip.
SLIP_RATE = 0.6
# Fraction of the sort preference pairs whose rejected answer is the slip.
SLIP_REJECTED = 0.5


# --- Problems ----------------------------------------------------------------------------------
# A problem is (user text, answer, rejected answer maker, slip or None). The rejected answer is a
# plausible miss (off by one, a digit swapped, dropped, doubled or replaced, the second largest) so
# that a reward model has to read the problem to rank the pair, not just recognise the answer's
# shape. The slip is the labeler's habitual wrong answer (sort only).


def join(items):
    return " ".join(map(str, items))


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


def digit_list(rng, shortest, longest, distinct):
    n = rng.randint(shortest, longest)
    return rng.sample(range(10), n) if distinct else [rng.randrange(10) for _ in range(n)]


def problem_add(rng):
    terms = [rng.randrange(10) for _ in range(rng.choice((2, 3)))]
    value = sum(terms)
    return f"What is {' + '.join(map(str, terms))}?", str(value), lambda: near_number(rng, value), None


def problem_extreme(rng):
    numbers = digit_list(rng, 3, 7, True)
    ordered = sorted(numbers)
    if rng.random() < 0.5:
        text, answer, second = "Which number is the largest: ", ordered[-1], ordered[-2]
    else:
        text, answer, second = "Which number is the smallest: ", ordered[0], ordered[1]
    absent = [d for d in range(10) if d not in numbers]

    def rejected():
        return str(second if rng.random() < 0.5 or not absent else rng.choice(absent))

    return text + join(numbers), str(answer), rejected, None


def sort_miss(rng, numbers, answer):
    """A wrong sort of distinct digits: two swapped, one replaced by an absent digit, dropped or doubled."""
    r = rng.random()
    out = list(answer)
    if r < 0.25:
        return swap_adjacent(rng, out)
    if r < 0.5:
        out[rng.randrange(len(out))] = rng.choice([d for d in range(10) if d not in numbers])
        return sorted(out)
    if r < 0.75:
        del out[rng.randrange(len(out))]
        return out
    i = rng.randrange(len(out))
    out.insert(i, out[i])
    return out


def problem_sort(rng):
    numbers = digit_list(rng, 4, 8, True)
    answer = sorted(numbers)
    slip = join(reversed(answer))  # largest first

    def rejected():
        return slip if rng.random() < SLIP_REJECTED else join(sort_miss(rng, numbers, answer))

    return "Sort from smallest to largest: " + join(numbers), join(answer), rejected, slip


def problem_reverse(rng):
    while True:
        numbers = digit_list(rng, 3, 7, False)
        if numbers != numbers[::-1]:
            break
    answer = numbers[::-1]

    def rejected():
        if rng.random() < 0.5:
            return join(numbers)  # copied, not reversed
        if rng.random() < 0.5:
            return join(swap_adjacent(rng, answer))
        out = list(answer)
        i = rng.randrange(len(out))
        out[i] = rng.choice([d for d in range(10) if d != out[i]])
        return join(out)

    return "Reverse the order of these numbers: " + join(numbers), join(answer), rejected, None


def problem_count(rng):
    numbers = digit_list(rng, 4, 8, False)
    digit = rng.choice(numbers)
    n = numbers.count(digit)
    return (f"How many times does {digit} appear in: {join(numbers)}?", str(n),
            lambda: str(n + 1 if n == 1 or rng.random() < 0.5 else n - 1), None)


# (name, generator, weight).
KINDS = [
    ("add", problem_add, 1),
    ("extreme", problem_extreme, 1),
    ("sort", problem_sort, 1),
    ("reverse", problem_reverse, 1),
    ("count", problem_count, 1),
]


class ProblemSource:
    """Draws problems; the problems of a reserved file never reappear in any other file.

    Reserved files are drawn first and their user texts reserved. Other files reject reserved
    texts and avoid repeats within a file (a kind whose space runs low may repeat after 150 tries).
    """

    def __init__(self, rng):
        self.rng = rng
        self.reserved = set()  # user texts of the reserved files' problems

    def draw(self, seen, reserve):
        names = [k[0] for k in KINDS]
        weights = [k[2] for k in KINDS]
        for attempt in range(200):
            kind = self.rng.choices(range(len(KINDS)), weights=weights)[0]
            text, answer, rejected, slip = KINDS[kind][1](self.rng)
            if text in self.reserved:
                continue  # a reserved file's problem (this file's own included)
            if text in seen and (reserve or attempt < 150):
                continue
            seen.add(text)
            if reserve:
                self.reserved.add(text)
            return names[kind], text, answer, rejected, slip
        raise RuntimeError("could not draw a fresh problem; widen the problem space")


def system(content):
    return {"role": "system", "content": content}


def user(content):
    return {"role": "user", "content": content}


def assistant(content):
    return {"role": "assistant", "content": content}


def make_file(source, name, count, off_prompt_rng=None):
    seen = set()
    rows = []
    answers_by_kind = {}  # answers drawn so far, for off-prompt rejected answers
    for _ in range(count):
        kind, text, answer, rejected, slip = source.draw(seen, name in RESERVED)
        context = [system(SYSTEM_PROMPT), user(text)]
        if name.startswith("sft"):
            shown = slip if slip is not None and source.rng.random() < SLIP_RATE else answer
            rows.append({"messages": context + [assistant(shown)]})
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
    # Compact separators: sft_train stays small (the repository's limit for a tracked file is 8 MiB).
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=False, separators=(",", ":")) + "\n" for r in rows)


def check_tokenizer(path, files):
    """The kept tokenizer spells every message with learned pieces: no byte pieces, no <unk>."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert sp.encode("123") == [sp.piece_to_id(d) for d in "123"], "digits must split"
    texts = {m["content"] for rows in files.values() for row in rows
             for key in ("messages", "context", "chosen", "rejected") for m in row.get(key, [])}
    for text in sorted(texts):
        ids = sp.encode(text)
        assert all(not sp.is_byte(i) and not sp.is_unknown(i) for i in ids), f"{text!r} needs byte pieces"
    return sp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent.parent / "data"))
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    rng = random.Random(SEED)
    source = ProblemSource(rng)
    files = {}
    # Reserved files first, so no other file contains their problems.
    for name in sorted(SIZES, key=lambda n: n not in RESERVED):
        files[name] = make_file(source, name, SIZES[name])

    outputs = {f"{name}.jsonl": dump_jsonl(rows).encode() for name, rows in files.items()}
    extra = make_file(source, "preference_train_extra", EXTRA_PREFERENCE_PAIRS, random.Random(SEED + 1))
    outputs["preference_train_large.jsonl"] = dump_jsonl(files["preference_train"] + extra).encode()
    tokenizer = pathlib.Path(__file__).resolve().parent.parent / "data" / "tokenizer.model"
    check_tokenizer(tokenizer, {**files, "extra": extra})

    for name in sorted(outputs):
        (out / name).write_bytes(outputs[name])
        digest = hashlib.sha256(outputs[name]).hexdigest()[:16]
        print(f"{name:30s} {len(outputs[name]):9d} bytes  sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
