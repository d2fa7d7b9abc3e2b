#!/usr/bin/env python3
"""Data for scripts/demo-real.sh: two-digit addition for SmolLM2-135M-Instruct, plus rehearsal.

  make_real_demo_data.py OUTDIR           writes the questions:
    additions.jsonl          {"messages": [system, user, assistant]}: "What is 47 + 38?" -> "85"
    eval_sft.jsonl           the same form, held out (the training loss on unseen questions)
    prompts_eval.jsonl       {"messages": [system, user], "gt_answer": "85"}: held out, for `ferry eval`
    rehearsal_prompts.jsonl  everyday questions (capitals, one-sentence explanations, tips, haiku)
    general_prompts.jsonl    more everyday questions on other subjects, held out: how the tuned
                             model answers what it was not tuned for
  make_real_demo_data.py --no-system OUTDIR   the same questions without the system message (for a
    base model, scripts/demo-gemma3.sh: each addition is then about 24 tokens instead of 37)
  make_real_demo_data.py --mix OUTDIR     writes train.jsonl: the additions and, as rehearsal, the
    released model's own greedy answers to rehearsal_prompts.jsonl (rehearsal_answers.jsonl, written
    by `ferry generate`; answers that did not end within the token limit are left out), repeated so
    that they are about 15% of the rows. Without them the tuned model answers every question
    with a number ("What is the capital of Australia?" -> "1234").

Every addition uses the system prompt "You are a helpful assistant. Reply with the number only.";
the model as released answers none of them exactly (it explains instead, and its sums are often
wrong), so both the format and the arithmetic are learned. Held-out pairs (a, b) never occur in
training, in either order. Deterministic (seed 2026).
"""
import json
import pathlib
import random
import sys

SYSTEM = "You are a helpful assistant. Reply with the number only."
ADDITIONS = 2200
REHEARSAL_FRACTION = 0.15

# Everyday questions: the rehearsal subjects and the held-out ones never share a subject.
TEMPLATES = [
    ("What is the capital of {}?",
     ["France", "Japan", "Italy", "Spain", "Germany", "Canada", "Egypt", "Brazil", "Kenya", "India",
      "Mexico", "Norway", "Peru", "Greece", "Turkey", "Chile", "Sweden", "Poland", "Ireland", "Portugal"],
     ["Australia", "Argentina", "Thailand", "Finland", "Vietnam"]),
    ("Explain {} in one sentence.",
     ["photosynthesis", "gravity", "democracy", "inflation", "a volcano", "the internet", "an atom",
      "evolution", "a rainbow", "electricity", "a black hole", "recycling", "a vaccine", "friction",
      "sleep", "music", "a computer", "the weather", "a map", "money"],
     ["an earthquake", "a battery", "a cloud", "a library", "a bridge"]),
    ("Give me one tip for {}.",
     ["studying", "cooking pasta", "running", "saving money", "learning a language", "writing an email",
      "sleeping well", "gardening", "staying focused", "public speaking"],
     ["painting", "camping", "making friends"]),
    ("Write one sentence about {}.",
     ["the ocean", "autumn", "cats", "coffee", "the moon", "mountains", "rain", "books", "trains", "the city"],
     ["winter", "dogs", "the desert"]),
    ("Write a haiku about {}.",
     ["spring", "the sea", "a forest", "snow", "the sun", "a river", "stars", "flowers"],
     ["the wind", "a garden", "night"]),
]
GENERAL_EXTRA = ["Hello! Who are you?", "What can you help me with?", "What is the largest planet?"]


def conversation(a, b, system=True):
    user = [{"role": "user", "content": f"What is {a} + {b}?"}]
    return ([{"role": "system", "content": SYSTEM}] if system else []) + user


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def write_questions(out: pathlib.Path, system: bool = True) -> None:
    rng = random.Random(2026)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    rng.shuffle(pairs)
    held, seen = [], set()
    for a, b in pairs:
        if len(held) == 300:
            break
        if (b, a) not in seen:
            held.append((a, b))
            seen.add((a, b))
    blocked = seen | {(b, a) for a, b in seen}
    train = [p for p in pairs if p not in blocked][:ADDITIONS]
    answer = lambda a, b: [{"role": "assistant", "content": str(a + b)}]
    write_jsonl(out / "additions.jsonl", ({"messages": conversation(a, b, system) + answer(a, b)} for a, b in train))
    write_jsonl(out / "eval_sft.jsonl",
                ({"messages": conversation(a, b, system) + answer(a, b)} for a, b in held[200:]))
    prompt = lambda a, b: {"messages": conversation(a, b, system), "gt_answer": str(a + b), "kind": "add"}
    write_jsonl(out / "prompts_eval.jsonl", (prompt(a, b) for a, b in held[:200]))
    user = lambda text: {"messages": [{"role": "user", "content": text}]}
    write_jsonl(out / "rehearsal_prompts.jsonl",
                (user(template.format(s)) for template, subjects, _ in TEMPLATES for s in subjects))
    general = [template.format(s) for template, _, held_out in TEMPLATES for s in held_out] + GENERAL_EXTRA
    write_jsonl(out / "general_prompts.jsonl", (user(text) for text in general))


def write_training_mix(out: pathlib.Path) -> None:
    additions = [json.loads(line) for line in open(out / "additions.jsonl")]
    rehearsal = []
    for line in open(out / "rehearsal_answers.jsonl"):
        row = json.loads(line)
        if row["stopped"] and row["completion"].strip():
            rehearsal.append({"messages": row["messages"] + [{"role": "assistant", "content": row["completion"]}]})
    if not rehearsal:
        raise SystemExit(f"{out / 'rehearsal_answers.jsonl'}: no answer ended within the token limit")
    repeats = max(1, round(REHEARSAL_FRACTION / (1 - REHEARSAL_FRACTION) * len(additions) / len(rehearsal)))
    rows = additions + rehearsal * repeats
    random.Random(2026).shuffle(rows)
    write_jsonl(out / "train.jsonl", rows)
    print(f"{out / 'train.jsonl'}: {len(additions)} additions + {len(rehearsal)} rehearsal answers x {repeats}")


def main() -> int:
    if sys.argv[1:2] == ["--mix"] and len(sys.argv) == 3:
        write_training_mix(pathlib.Path(sys.argv[2]))
    elif len(sys.argv) == 2 or (sys.argv[1:2] == ["--no-system"] and len(sys.argv) == 3):
        out = pathlib.Path(sys.argv[-1])
        out.mkdir(parents=True, exist_ok=True)
        write_questions(out, system=len(sys.argv) == 2)
    else:
        raise SystemExit("usage: make_real_demo_data.py OUTDIR | --no-system OUTDIR | --mix OUTDIR")
    return 0


if __name__ == "__main__":
    sys.exit(main())
