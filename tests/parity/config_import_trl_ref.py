#!/usr/bin/env python3
"""Reference for `ferry config import --from trl`: what TRL 1.16 itself makes of the example YAMLs.

Usage: config_import_trl_ref.py OUTDIR. For each of tests/data/config_import/trl_{sft,dpo,grpo}.yaml, parses it
with TRL's own TrlParser over the dataclasses its CLI script uses (ScriptArguments or GRPOScriptArguments, the
stage's config class, ModelConfig, DatasetMixtureConfig) as `trl <stage> --config FILE` does, and writes
OUTDIR/resolved.json: {"sft": {...}, "dpo": {...}, "grpo": {...}}, each with the resolved values (TRL's defaults
filled in) in the units Ferry counts them:
  learning_rate, num_train_epochs, max_steps, per_device_train_batch_size, gradient_accumulation_steps, seed,
  lr_scheduler_type, bf16, gradient_checkpointing, max_length (sft, dpo), output_dir, dataset_name, eval_strategy,
  lora_r, lora_alpha, lora_target_modules (as given), beta (dpo, grpo)
  lora_dropout_effective: lora_dropout, or 0 when the config's disable_dropout is on (the trainers call
      disable_dropout_in_model after get_peft_model, which zeroes LoRA's nn.Dropout too)
  warmup_steps_resolved: TrainingArguments.get_warmup_steps(max_steps) when max_steps > 0
  grpo: generation_batch_size, steps_per_generation, num_generations, num_iterations, max_completion_length,
      loss_type, scale_rewards, and optimizer_steps_per_generation = steps_per_generation * num_iterations /
      gradient_accumulation_steps (GRPOTrainer regenerates every steps_per_generation * num_iterations micro-steps
      and steps the optimizer every gradient_accumulation_steps), with rollouts = ceil(max_steps / that) and
      save_rollouts = ceil(save_steps / that)
`--use_cpu true` is added to the arguments: TrainingArguments refuses bf16 on a machine without a GPU otherwise; it
changes none of the values above.
"""
import json
import math
import pathlib
import sys

from trl import DatasetMixtureConfig, DPOConfig, GRPOConfig, ModelConfig, ScriptArguments, SFTConfig, TrlParser
from trl.scripts.grpo import GRPOScriptArguments

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "config_import"


def parse(script_args_class, config_class, name):
    parser = TrlParser((script_args_class, config_class, ModelConfig, DatasetMixtureConfig))
    args = ["--config", str(DATA / name), "--use_cpu", "true"]
    return parser.parse_args_and_config(args, fail_with_unknown_args=False)


def common(script, training, model):
    out = {
        "learning_rate": training.learning_rate,
        "num_train_epochs": training.num_train_epochs,
        "max_steps": training.max_steps,
        "per_device_train_batch_size": training.per_device_train_batch_size,
        "gradient_accumulation_steps": training.gradient_accumulation_steps,
        "seed": training.seed,
        "lr_scheduler_type": str(getattr(training.lr_scheduler_type, "value", training.lr_scheduler_type)),
        "bf16": bool(training.bf16),
        "gradient_checkpointing": bool(training.gradient_checkpointing),
        "output_dir": training.output_dir,
        "dataset_name": script.dataset_name,
        "eval_strategy": str(getattr(training.eval_strategy, "value", training.eval_strategy)),
        "use_peft": model.use_peft,
        "lora_r": model.lora_r,
        "lora_alpha": model.lora_alpha,
        "lora_target_modules": model.lora_target_modules,
        "lora_dropout_effective": 0.0 if getattr(training, "disable_dropout", False) else model.lora_dropout,
    }
    if training.max_steps > 0:
        out["warmup_steps_resolved"] = training.get_warmup_steps(training.max_steps)
    if hasattr(training, "max_length") and training.max_length is not None:
        out["max_length"] = training.max_length
    return out


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    resolved = {}

    script, training, model, _ = parse(ScriptArguments, SFTConfig, "trl_sft.yaml")
    resolved["sft"] = common(script, training, model)
    resolved["sft"]["packing"] = training.packing

    script, training, model, _ = parse(ScriptArguments, DPOConfig, "trl_dpo.yaml")
    resolved["dpo"] = common(script, training, model)
    resolved["dpo"]["beta"] = training.beta
    resolved["dpo"]["loss_type"] = list(training.loss_type)
    resolved["dpo"]["loss_weights"] = list(training.loss_weights)

    script, training, model, _ = parse(GRPOScriptArguments, GRPOConfig, "trl_grpo.yaml")
    g = common(script, training, model)
    per_generation = training.steps_per_generation * training.num_iterations / training.gradient_accumulation_steps
    g.update({
        "beta": training.beta,
        "generation_batch_size": training.generation_batch_size,
        "steps_per_generation": training.steps_per_generation,
        "num_generations": training.num_generations,
        "num_iterations": training.num_iterations,
        "max_completion_length": training.max_completion_length,
        "loss_type": training.loss_type,
        "scale_rewards": training.scale_rewards,
        "optimizer_steps_per_generation": per_generation,
        "rollouts": math.ceil(training.max_steps / per_generation),
        "save_rollouts": math.ceil(training.save_steps / per_generation),
    })
    resolved["grpo"] = g

    (out / "resolved.json").write_text(json.dumps(resolved, indent=1, sort_keys=True))
    print(f"config_import_trl: wrote {out / 'resolved.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
