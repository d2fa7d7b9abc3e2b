#!/usr/bin/env python3
"""Reference outputs of tiny random Hugging Face Llama models, for the model and generation parity tests.

Usage: model_llama_ref.py OUTDIR. For each model below, OUTDIR/<name>/ gets:
  model/               save_pretrained (config.json + model.safetensors)
  logits.safetensors   input_ids, attention_mask (B, T) left-padded; logits (fp32 model),
                       logits_bf16 and logits_fp16 (the same weights loaded in bf16 / fp16 and
                       run on the CPU, logits stored as fp32), all (B, T, V); the RoPE inverse
                       frequencies inv_freq (head_dim / 2)
  generate.safetensors prompt_ids, prompt_mask; greedy_free (20 new tokens, no EOS) and
                       greedy_free_logprobs (log_softmax of the raw logits at the chosen tokens);
                       greedy_eos (EOS set to a token that row 0 produces midway), eos_id
and OUTDIR/score/ a LlamaForSequenceClassification (num_labels 1, the reward-model layout):
  model/ and score.safetensors with input_ids, attention_mask (rows right- and left-padded),
  values (B, T) per-token scores and scores (B) at each row's last token.
The models: `plain`; `gqa_tied_llama3` (grouped-query attention, tied embeddings, llama3 rope
scaling, head_dim != hidden/heads); `bias_linear` (q/k/v/o and MLP biases, linear rope scaling).
"""
import pathlib
import sys

import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

PAD = 0
VOCAB = 128

MODELS = {
    "plain": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=4, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    "gqa_tied_llama3": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=32, tie_word_embeddings=True,
                            rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 64}),
    "bias_linear": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, attention_bias=True, mlp_bias=True,
                        rope_parameters={"rope_type": "linear", "rope_theta": 500000.0, "factor": 2.0}),
}


def make_inputs(generator):
    # 3 rows of 12 columns, left padding of 0, 3 and 7 tokens.
    ids = torch.randint(1, VOCAB, (3, 12), generator=generator)
    mask = torch.ones(3, 12, dtype=torch.long)
    for row, pad in enumerate([0, 3, 7]):
        ids[row, :pad] = PAD
        mask[row, :pad] = 0
    return ids, mask


def positions(mask):
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def random_causal_lm(model_class, config, random_norms=False):
    """A random `model_class(config)` in eval mode, drawn from torch's global generator. With
    random_norms, every RMSNorm's effective scale is drawn around 1 instead of being 1, so that a
    norm weight applied in the wrong place changes the logits: weights initialised to 1 (Llama's
    x * w) become 1 + 0.3 N(0, 1); weights initialised to 0 (Gemma's x * (1 + w)) become 0.3 N(0, 1)."""
    model = model_class(config).eval()
    if random_norms:
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.endswith("norm.weight"):
                    centre = 0.0 if bool((parameter == 0).all()) else 1.0
                    parameter.copy_(centre + 0.3 * torch.randn_like(parameter))
        unreached = [name for name, module in model.named_modules()
                     if "Norm" in type(module).__name__ and not f"{name}.weight".endswith("norm.weight")]
        assert not unreached, f"random_norms misses {unreached}"
    return model


def rope_frequencies(model):
    """inv_freq of the model's rotary embedding (LongRoPE: also long_inv_freq, attention_scaling); for models whose layer types each have their own
    RoPE (Gemma 3, OLMo 3), inv_freq is the full-attention layers' and inv_freq_<type> /
    rope_scaling_<type> (the cos/sin factor, shape (1,)) are given for every layer type."""
    rotary = model.model.rotary_emb
    if getattr(rotary, "rope_type", None) == "longrope":
        # LongRoPE: inv_freq is the short factors' (transformers swaps it in place after a long
        # forward, so it is taken from original_inv_freq); long_inv_freq the long factors', as
        # transformers computes them for a sequence past the original context; attention_scaling
        # the cos/sin factor.
        original = model.config.rope_parameters["original_max_position_embeddings"]
        long_inv_freq, _ = ROPE_INIT_FUNCTIONS["longrope"](model.config, None, seq_len=original + 1)
        return {"inv_freq": rotary.original_inv_freq.float().contiguous(),
                "long_inv_freq": long_inv_freq.float().contiguous(),
                "attention_scaling": torch.tensor([float(rotary.attention_scaling)])}
    if hasattr(rotary, "inv_freq"):
        return {"inv_freq": rotary.inv_freq.float().contiguous()}
    out = {"inv_freq": getattr(rotary, "full_attention_inv_freq").float().clone()}
    for layer_type in rotary.layer_types:
        out[f"inv_freq_{layer_type}"] = getattr(rotary, f"{layer_type}_inv_freq").float().contiguous()
        out[f"rope_scaling_{layer_type}"] = torch.tensor([float(getattr(rotary, f"{layer_type}_attention_scaling"))])
    return out


def write_causal_lm_reference(model_class, config, folder, seed, random_norms=False, model=None):
    """Writes folder/model, folder/logits.safetensors and folder/generate.safetensors (see the top)
    for a random `model_class(config)` (see random_causal_lm), or `model` when given; `seed` picks
    the inputs. Also used by model_families_ref.py."""
    if model is None:
        model = random_causal_lm(model_class, config, random_norms)
    model.save_pretrained(folder / "model", safe_serialization=True)

    generator = torch.Generator().manual_seed(7 + seed)
    ids, mask = make_inputs(generator)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits
        low = model_class.from_pretrained(folder / "model", dtype=torch.bfloat16).eval()
        logits_bf16 = low(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits.float()
        half = model_class.from_pretrained(folder / "model", dtype=torch.float16).eval()
        logits_fp16 = half(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits.float()
    save_file({"input_ids": ids, "attention_mask": mask, "logits": logits.contiguous(),
               "logits_bf16": logits_bf16.contiguous(), "logits_fp16": logits_fp16.contiguous(),
               **rope_frequencies(model)},
              str(folder / "logits.safetensors"))

    prompt_ids, prompt_mask = make_inputs(torch.Generator().manual_seed(70 + seed))
    prompt_ids, prompt_mask = prompt_ids[:, :9], prompt_mask[:, :9]
    with torch.no_grad():
        free = model.generate(prompt_ids, attention_mask=prompt_mask, max_new_tokens=20, do_sample=False,
                              pad_token_id=PAD, eos_token_id=None, return_dict_in_generate=True,
                              output_logits=True)
        chosen = free.sequences[:, 9:]
        logprobs = torch.stack([step.float().log_softmax(-1).gather(1, chosen[:, i:i + 1]).squeeze(1)
                                for i, step in enumerate(free.logits)], 1)
        eos = int(free.sequences[0, 9 + 6])  # row 0 stops after at most 7 new tokens (others may stop too)
        stopped = model.generate(prompt_ids, attention_mask=prompt_mask, max_new_tokens=20, do_sample=False,
                                 pad_token_id=PAD, eos_token_id=eos)
    save_file({"prompt_ids": prompt_ids.contiguous(), "prompt_mask": prompt_mask.contiguous(),
               "greedy_free": free.sequences.contiguous(), "greedy_free_logprobs": logprobs.contiguous(),
               "greedy_eos": stopped.contiguous(), "eos_id": torch.tensor([eos])},
              str(folder / "generate.safetensors"))
    print(f"{folder.name}: {type(model).__name__}, logits {tuple(logits.shape)}, greedy {tuple(free.sequences.shape)}, "
          f"with eos {eos}: {tuple(stopped.shape)}")


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    for seed, (name, shape) in enumerate(MODELS.items()):
        torch.manual_seed(100 + seed)
        config = LlamaConfig(vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5, pad_token_id=PAD,
                             bos_token_id=1, eos_token_id=2, initializer_range=0.2, **shape)
        write_causal_lm_reference(LlamaForCausalLM, config, out / name, seed)
    write_score_model(out / "score")
    return 0


def write_score_model(folder):
    torch.manual_seed(300)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pad_token_id=PAD, num_labels=1,
                         initializer_range=0.2, rms_norm_eps=1e-5)
    model = LlamaForSequenceClassification(config).eval()
    model.save_pretrained(folder / "model", safe_serialization=True)
    ids = torch.randint(1, VOCAB, (3, 8), generator=torch.Generator().manual_seed(301))
    mask = torch.ones(3, 8, dtype=torch.long)
    ids[0, 5:] = PAD  # right padding
    mask[0, 5:] = 0
    ids[1, :2] = PAD  # left padding
    mask[1, :2] = 0
    with torch.no_grad():
        scores = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits.squeeze(-1)
        hidden = model.model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).last_hidden_state
        values = model.score(hidden).squeeze(-1)
    save_file({"input_ids": ids, "attention_mask": mask, "values": values.contiguous(), "scores": scores.contiguous()},
              str(folder / "score.safetensors"))
    print(f"score: values {tuple(values.shape)}, scores {scores.tolist()}")


if __name__ == "__main__":
    sys.exit(main())
