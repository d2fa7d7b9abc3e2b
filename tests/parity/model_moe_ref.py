#!/usr/bin/env python3
"""Reference outputs of tiny random Mixture-of-Experts models, for the model, generation and MoE
parity tests.

Usage: model_moe_ref.py OUTDIR. For each model below, OUTDIR/<name>/ gets what model_llama_ref.py
writes (model/ as transformers' save_pretrained writes it, per-expert tensors; logits.safetensors in
fp32, bf16 and fp16; generate.safetensors), and moe.safetensors:
  router_logits_<layer>  (B * T, E) each sparse layer's router logits on logits.safetensors' inputs
  aux_loss               (1,) load_balancing_loss_func over those layers, padding rows left out
  loss, ce_loss          (1,) the training loss with labels = input_ids (-100 on padding and on each
                         row's first token, which a padding position would predict), the mean
                         cross-entropy, and loss = ce_loss + router_aux_loss_coef * aux_loss
                         (output_router_logits on)
  grad.<parameter name>  d loss / d parameter for every parameter (per-expert names, as saved)
and qwen3_moe also model_fused/: the same weights saved in transformers 5's in-memory layout
(save_original_format=False: mlp.experts.gate_up_proj (E, 2F, C), mlp.experts.down_proj (E, C, F)).
Every model has 4 or more experts, top-2, 3 layers, random norms, output_router_logits on in its
config.json (so transformers' loss, and Ferry's training loss, add router_aux_loss_coef x aux; set
after generating: transformers' generate fails with it on and an attention mask), and router weights drawn large
enough that the top-2 choice is clear (ROUTER_STD):
  qwen3_moe     Qwen3MoeForCausalLM: 6 experts, norm_topk_prob, mlp_only_layers [1] (layer 1 dense)
  qwen2_moe     Qwen2MoeForCausalLM: 4 experts, shared expert with its sigmoid gate, q/k/v biases
  mixtral       MixtralForCausalLM: 4 experts (block_sparse_moe, w1/w2/w3), sliding_window 5
  olmoe         OlmoeForCausalLM: 5 experts, q/k norms over the whole projections
"""
import json
import pathlib
import sys

import torch
from safetensors.torch import save_file
from transformers import (MixtralConfig, MixtralForCausalLM, OlmoeConfig, OlmoeForCausalLM, Qwen2MoeConfig,
                          Qwen2MoeForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)
from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

from model_llama_ref import PAD, VOCAB, make_inputs, positions, random_causal_lm, write_causal_lm_reference

COMMON = dict(vocab_size=VOCAB, max_position_embeddings=256, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
              initializer_range=0.2, num_hidden_layers=3, hidden_size=64, num_attention_heads=4,
              num_key_value_heads=2, rms_norm_eps=1e-6, num_experts_per_tok=2, router_aux_loss_coef=0.02)

# The routers' weights are redrawn with this std so the top-2 probabilities are well apart and bf16
# rounding does not swap a token's experts.
ROUTER_STD = 0.5

MODELS = {
    "qwen3_moe": (Qwen3MoeForCausalLM, Qwen3MoeConfig(
        intermediate_size=96, moe_intermediate_size=48, num_experts=6, norm_topk_prob=True, mlp_only_layers=[1],
        head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **COMMON)),
    "qwen2_moe": (Qwen2MoeForCausalLM, Qwen2MoeConfig(
        intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=80, num_experts=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **COMMON)),
    "mixtral": (MixtralForCausalLM, MixtralConfig(
        intermediate_size=48, num_local_experts=4, sliding_window=5,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **COMMON)),
    "olmoe": (OlmoeForCausalLM, OlmoeConfig(
        intermediate_size=40, num_experts=5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **COMMON)),
}


def build_model(name):
    model_class, config = MODELS[name]
    torch.manual_seed(500 + list(MODELS).index(name))
    model = random_causal_lm(model_class, config, random_norms=True)
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            if parameter_name.endswith(".gate.weight"):
                parameter.normal_(0.0, ROUTER_STD)
    return model


def parameter_names(model):
    """transformers' in-memory name -> the per-expert names it saves: fused experts.gate_up_proj
    (E, 2F, C) splits into experts.N.gate_proj / up_proj (Mixtral: w1 / w3), experts.down_proj into
    experts.N.down_proj (w2); every other name as it is (Mixtral's mlp. is block_sparse_moe. on disk)."""
    mixtral = isinstance(model, MixtralForCausalLM)
    out = {}
    for name, parameter in model.named_parameters():
        if parameter.grad is None:
            continue
        grad = parameter.grad
        disk = name.replace(".mlp.", ".block_sparse_moe.") if mixtral else name
        if name.endswith("experts.gate_up_proj"):
            prefix = disk[: -len("gate_up_proj")]
            half = grad.shape[1] // 2
            for e in range(grad.shape[0]):
                out[f"{prefix}{e}.{'w1' if mixtral else 'gate_proj'}.weight"] = grad[e, :half]
                out[f"{prefix}{e}.{'w3' if mixtral else 'up_proj'}.weight"] = grad[e, half:]
        elif name.endswith("experts.down_proj"):
            prefix = disk[: -len("down_proj")]
            for e in range(grad.shape[0]):
                out[f"{prefix}{e}.{'w2' if mixtral else 'down_proj'}.weight"] = grad[e]
        else:
            out[disk] = grad
    return out


def write_moe_reference(name, folder):
    model = build_model(name)
    ids, mask = make_inputs(torch.Generator().manual_seed(7 + 10 + list(MODELS).index(name)))
    # Padding, and each row's first token (a padding position predicts it), are no loss target:
    # no term of the loss depends on a padding position's output.
    first = torch.cat([torch.ones_like(mask[:, :1]), mask[:, :-1]], 1) == 0
    labels = ids.masked_fill((mask == 0) | first, -100)
    model.train()  # no dropout in these configs; train mode only so the loss path is the training one
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask), labels=labels,
                output_router_logits=True)
    out.loss.backward()
    config = model.config
    experts = getattr(config, "num_experts", None) or config.num_local_experts
    aux = load_balancing_loss_func(out.router_logits, experts, config.num_experts_per_tok, mask)
    tensors = {"loss": out.loss.detach().reshape(1), "aux_loss": aux.detach().reshape(1),
               "ce_loss": (out.loss - config.router_aux_loss_coef * aux).detach().reshape(1)}
    sparse = [i for i, layer in enumerate(model.model.layers) if hasattr(layer.mlp, "experts")]
    for layer, logits in zip(sparse, out.router_logits):
        tensors[f"router_logits_{layer}"] = logits.detach().float().contiguous()
    for parameter_name, grad in parameter_names(model).items():
        tensors[f"grad.{parameter_name}"] = grad.detach().float().contiguous()
    save_file(tensors, str(folder / "moe.safetensors"))
    if name == "qwen3_moe":  # transformers 5's own layout: fused 3-D experts (save_original_format=False)
        model.save_pretrained(folder / "model_fused", safe_serialization=True, save_original_format=False)
        fused = folder / "model_fused" / "config.json"
        fused.write_text(json.dumps({**json.loads(fused.read_text()), "output_router_logits": True}, indent=2) + "\n")
    config_json = folder / "model" / "config.json"
    saved = json.loads(config_json.read_text())
    saved["output_router_logits"] = True
    config_json.write_text(json.dumps(saved, indent=2) + "\n")
    print(f"{name}: loss {out.loss.item():.6f}, aux {aux.item():.6f}, sparse layers {sparse}")


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    for seed, (name, (model_class, config)) in enumerate(MODELS.items()):
        write_causal_lm_reference(model_class, config, out / name, 10 + seed, model=build_model(name))
        write_moe_reference(name, out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
