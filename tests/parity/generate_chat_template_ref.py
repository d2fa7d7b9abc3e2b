#!/usr/bin/env python3
"""References for tests/parity/generate_chat_template_parity_test.cpp: tiny random Llama models
(transformers LlamaForCausalLM, 2 layers, hidden 64) in Hugging Face folders whose chat template
Ferry has never seen, as issue 33 reports them:
  smollm2_literal_newlines: a byte-level BPE tokenizer.json like SmolLM2's (Digits + ByteLevel) and
    SmolLM2's chat template written with literal newlines instead of "\\n" escapes, in
    chat_template.jinja (as transformers saves it);
  qwen25_no_tools: a byte-level BPE like Qwen2's (its regex + NFC) and Qwen2.5's template without
    the tool branches, in tokenizer_config.json's chat_template.
For each folder and prompt conversation, cases.json holds apply_chat_template's text and ids
(add_generation_prompt=True), and transformers' greedy generate() continuation (max_new_tokens 12,
stopping at eos_token <|im_end|>) with its decoded text (skip_special_tokens=True); under
"continued", the same for conversations ending with the start of the assistant's answer, rendered
with continue_final_message=True (a prefilled reply the model continues), and OUTDIR/continued.jsonl
holds those conversations as `ferry generate --prompts` lines.
"""
import json
import os
import pathlib
import random
import sys
import warnings

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402

transformers.logging.set_verbosity_error()
HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from tokenizer_bpe_ref import corpus_text, split_corpus  # noqa: E402
from tokenizer_chat_templates_ref import build_bpe  # noqa: E402

SMOLLM2 = (ROOT / "configs/templates/jinja/smollm2/SmolLM2-1.7B-Instruct.jinja").read_text().replace("\\n", "\n")
QWEN25_NO_TOOLS = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant") %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
# Conversations whose last (assistant) message is the start of the answer, for continue_final_message.
CONTINUED = [
    [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "My favourite colour is"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 12 + 30?"},
     {"role": "assistant", "content": "The answer is "}],
]
PROMPTS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 12 + 30?"}],
    [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
     {"role": "user", "content": "Another one, please."}],
]


def write_folder(folder, kind, template, in_config, seed, sentences):
    folder.mkdir(parents=True, exist_ok=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=build_bpe(kind, sentences, vocab_size=700), eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", bos_token=None)
    fast.chat_template = template
    fast.save_pretrained(str(folder))
    if in_config:  # as Qwen2.5's repos keep it
        config = json.loads((folder / "tokenizer_config.json").read_text())
        config["chat_template"] = template
        (folder / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1))
        (folder / "chat_template.jinja").unlink()
    else:
        assert (folder / "chat_template.jinja").read_text() == template and "\\n" not in template
    tok = AutoTokenizer.from_pretrained(str(folder))
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=None, eos_token_id=eos,
                         pad_token_id=pad)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # larger weights than the default init, so greedy choices are not near ties
        for parameter in model.parameters():
            parameter.mul_(4.0 if parameter.dim() == 2 else 1.0)
    model.save_pretrained(str(folder), safe_serialization=True)
    def case(messages, **options):
        text = tok.apply_chat_template(messages, tokenize=False, **options)
        ids = tok.apply_chat_template(messages, tokenize=True, return_dict=True, **options)["input_ids"]
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=12, do_sample=False, eos_token_id=eos, pad_token_id=pad)
        new = out[0, len(ids):].tolist()
        return {"messages": messages, "text": text, "ids": ids, "new_ids": new,
                "completion": tok.decode([t for t in new if t != eos], skip_special_tokens=True)}

    cases = [case(messages, add_generation_prompt=True) for messages in PROMPTS]
    continued = [case(messages, continue_final_message=True) for messages in CONTINUED]
    for c in continued:  # the answer's start is the end of the text: no end of turn after it
        assert c["text"].endswith(c["messages"][-1]["content"]), c["text"]
    return {"folder": str(folder), "cases": cases, "continued": continued, "eos_id": eos}


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    rng = random.Random(33)
    sentences = split_corpus(corpus_text(rng, 40_000), rng)
    sentences += [m["content"] for p in PROMPTS for m in p] * 10 + [SMOLLM2, QWEN25_NO_TOOLS]
    result = {"transformers_version": transformers.__version__, "folders": {
        "smollm2_literal_newlines": write_folder(out / "smollm2_literal_newlines", "smollm2", SMOLLM2, False, 1,
                                                 sentences),
        "qwen25_no_tools": write_folder(out / "qwen25_no_tools", "qwen2", QWEN25_NO_TOOLS, True, 2, sentences)}}
    (out / "cases.json").write_text(json.dumps(result, ensure_ascii=False, indent=1))
    (out / "continued.jsonl").write_text("".join(json.dumps({"messages": m}) + "\n" for m in CONTINUED))
    print(f"generate_chat_template_ref: transformers {transformers.__version__}: "
          + "; ".join(f"{name}: new ids {[c['new_ids'] for c in f['cases']]}" for name, f in result["folders"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
