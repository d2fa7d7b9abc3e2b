#!/usr/bin/env python3
"""Training references (loss and gradients, full and LoRA) of the tiny random models of
model_families_ref.py, for parity tests of Ferry's backward pass on each family (transformers and
peft on the CPU, fp32).

Usage: model_families_train_ref.py OUTDIR. For each model of model_families_ref.MODELS, rebuilt
with model_families_ref.build_model (the same weights as model_families/<name>/model, written again
here so that this fixture stands alone), OUTDIR/<name>/ gets:
  model/              save_pretrained of the base model
  lora/               peft's adapter folder (PeftModel.save_pretrained) of get_peft_model(base,
                      LoraConfig(r=4, lora_alpha=8, lora_dropout=0, the seven projections, or Phi-3's
                      four: qkv_proj, o_proj, gate_up_proj, down_proj)), every
                      lora_A and lora_B drawn N(0, 0.1^2) from a seeded generator (B non-zero, so that
                      lora_A gets gradients too)
  train.safetensors   (all tensors contiguous; ints int64, floats fp32)
    input_ids, attention_mask, labels, position_ids  (2, 10): row 0 has 10 tokens, row 1 has 7 and
                      3 of right padding (PAD, mask 0); labels are input_ids with -100 on the first 3
                      tokens and on the padding; position_ids 0..9 on both rows (as the Trainer's
                      default: padding's positions do not reach any loss term)
    loss              (1,) transformers' causal-LM loss of the full model: logits[:, t] against
                      labels[:, t + 1], mean over the labelled tokens (11 here)
    grad.<name>       d loss / d parameter for every parameter, by its transformers name
                      (model.layers.0.self_attn.q_proj.weight, ...): tied embeddings are one
                      parameter, model.embed_tokens.weight (no lm_head.weight), with both uses' sum
    lora_loss         (1,) the same loss through the LoRA model (base weights frozen)
    lora.<name>       every adapter weight by its name in lora/adapter_model.safetensors:
                      base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight (r, in),
                      ...lora_B.weight (out, r); scaling lora_alpha / r = 2
    lora_grad.<name>  d lora_loss / d that adapter weight
"""
import pathlib
import sys

import torch
from peft import LoraConfig, get_peft_model
from peft.utils import get_peft_model_state_dict
from safetensors.torch import load_file, save_file

from model_families_ref import MODELS, build_model
from model_llama_ref import PAD, VOCAB

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
FUSED_TARGETS = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]  # Phi-3, as PEFT names them
BATCH, WIDTH, LENGTHS, UNLABELLED = 2, 10, [10, 7], 3


def make_batch(seed):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (BATCH, WIDTH), generator=generator)
    mask = torch.zeros(BATCH, WIDTH, dtype=torch.long)
    for row, length in enumerate(LENGTHS):
        mask[row, :length] = 1
    ids = ids.masked_fill(mask == 0, PAD)
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :UNLABELLED] = -100
    positions = torch.arange(WIDTH).expand(BATCH, WIDTH).contiguous()
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "position_ids": positions}


def causal_lm_loss(logits, labels):
    # What transformers' ForCausalLMLoss computes, written out to check that its loss is this one.
    return torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                             labels[:, 1:].reshape(-1), ignore_index=-100)


def write_train_reference(name, folder, seed):
    batch = make_batch(seed)
    expected = dict(batch)

    model = build_model(name).train()
    model.save_pretrained(folder / "model", safe_serialization=True)
    output = model(**batch)
    loss = output.loss
    assert torch.allclose(loss, causal_lm_loss(output.logits, batch["labels"]), rtol=1e-6, atol=0), name
    loss.backward()
    expected["loss"] = loss.detach().reshape(1)
    for parameter_name, parameter in model.named_parameters():
        assert parameter.grad is not None, f"{name}: no gradient for {parameter_name}"
        expected["grad." + parameter_name] = parameter.grad.detach().clone()
    if model.config.tie_word_embeddings:
        assert "grad.lm_head.weight" not in expected and model.lm_head.weight is model.model.embed_tokens.weight

    base = build_model(name)
    targets = FUSED_TARGETS if model.config.model_type == "phi3" else TARGETS
    lora_config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets, bias="none",
                             task_type="CAUSAL_LM")
    lora_model = get_peft_model(base, lora_config).train()
    generator = torch.Generator().manual_seed(1000 + seed)
    with torch.no_grad():
        for parameter_name, parameter in lora_model.named_parameters():
            if "lora_" in parameter_name:
                parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
    lora_loss = lora_model(**batch).loss
    lora_loss.backward()
    lora_model.save_pretrained(folder / "lora")
    expected["lora_loss"] = lora_loss.detach().reshape(1)
    # peft's parameter names carry the adapter's name (...q_proj.lora_A.default.weight); its saved
    # adapter drops it (...q_proj.lora_A.weight): the names here are the saved ones.
    saved_names = set(get_peft_model_state_dict(lora_model))
    adapters = 0
    for parameter_name, parameter in lora_model.named_parameters():
        if "lora_" not in parameter_name:
            assert parameter.grad is None, f"{name}: the base's {parameter_name} is not frozen"
            continue
        saved_name = parameter_name.replace(".default.", ".")
        assert saved_name in saved_names, saved_name
        expected["lora." + saved_name] = parameter.detach().clone()
        expected["lora_grad." + saved_name] = parameter.grad.detach().clone()
        assert parameter.grad.abs().max() > 0, f"{name}: zero gradient for {saved_name}"
        adapters += 1
    assert adapters == 2 * len(targets) * model.config.num_hidden_layers, adapters
    saved = load_file(str(folder / "lora" / "adapter_model.safetensors"))
    assert all(torch.equal(saved[k], expected["lora." + k]) for k in saved) and len(saved) == adapters

    save_file({key: value.contiguous() for key, value in expected.items()}, str(folder / "train.safetensors"))
    print(f"{name}: loss {loss.item():.6f}, lora_loss {lora_loss.item():.6f}, "
          f"{sum(k.startswith('grad.') for k in expected)} parameter gradients, {adapters} adapters")


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    for seed, name in enumerate(MODELS):
        write_train_reference(name, out / name, 50 + seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
