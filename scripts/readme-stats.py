#!/usr/bin/env python3
"""How soon README.md gets to the user's own model.

Prints the total word count (as `wc -w` counts: runs of non-blank characters) and, for each
phrase, the 1-based index of the word where it first begins (any case, across line breaks,
punctuation and Markdown marks around words ignored). The default phrases are the ones the
README rewrite was measured with: "your model", "your own model", "use your own model", and the
old README's wording for the same idea, "the model a user already runs".

Usage: scripts/readme-stats.py [FILE] [--phrase TEXT ...]
"""
import argparse
import pathlib
import re
import sys

DEFAULT_PHRASES = ["your model", "your own model", "use your own model",
                   "the model a user already runs"]


def bare(word):
    """A word with surrounding punctuation and Markdown marks removed, lower case."""
    return re.sub(r"^[^\w]+|[^\w]+$", "", word.lower())


def first_index(words, phrase):
    target = [bare(w) for w in phrase.split()]
    plain = [bare(w) for w in words]
    for i in range(len(plain) - len(target) + 1):
        if plain[i:i + len(target)] == target:
            return i + 1
    return None


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=str(root / "README.md"))
    parser.add_argument("--phrase", action="append", help="a phrase to find (repeatable)")
    args = parser.parse_args()
    path = pathlib.Path(args.file)
    if not path.is_file():
        print(f"readme-stats: no such file: {path}", file=sys.stderr)
        return 2
    words = path.read_text(encoding="utf-8").split()
    print(f"file: {path}")
    print(f"words: {len(words)}")
    for phrase in args.phrase or DEFAULT_PHRASES:
        index = first_index(words, phrase)
        print(f'first "{phrase}" at word: {index if index else "absent"}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
