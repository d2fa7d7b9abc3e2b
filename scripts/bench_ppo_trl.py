#!/usr/bin/env python3
"""Times PPO episodes of TRL's PPOTrainer on the CPU with the demo models (the TRL half of
scripts/bench-ppo.sh, which puts Ferry's `train-ppo` episode time beside it).

One episode = one PPOTrainer update: sample --rollout-batch-size prompts, generate
--response-length tokens for each (sampling at --temperature), the no-grad forward passes (policy
logprobs from the generation scores, reference policy, value model, reward model), KL-penalised
rewards, GAE, and --ppo-epochs passes of minibatch updates of policy + value head. The models are
the demo's: the SFT model (runs/demo/sft/final) is the policy and, a second copy, the reference; the
reward model (runs/demo/rm/final) is the reward model and, a second copy, the value model -- as
Ferry's train-ppo does. fp32, CPU, --threads intra-op threads.

Prints per episode
    trl episode N: generate X s, score Y s, learn Z s, total T s
and at the end
    trl mean episode seconds (excluding the first): M
(the line bench-ppo.sh parses). The phases are timed around TRL's own code, without changing it:
  generate = the call to trl.trainer.utils.batch_generation (model.generate on the policy);
  score    = from the end of generation to the first training forward pass: the policy logprobs,
             reference / value / reward forward passes, rewards, GAE, advantage whitening;
  learn    = from the first training forward pass to the end of the episode (PPO minibatch
             forwards, backwards and AdamW steps, then TRL's per-episode metrics);
  total    = wall time of the whole episode (dataloader batch included), between successive
             on_step_end callbacks (the first episode starts at on_train_begin).

Which TRL: TRL 0.24.0, the last release with PPOTrainer (TRL 1.x dropped it), run against the deps
venv's torch / transformers 5 / accelerate. It lives apart from the venv's TRL 1.x, in
${FERRY_DEPS:-~/.cache/ferry}/trl-0.24 (installed on first use by this script with
`pip install --no-deps --target`, nothing else changes), and goes first on sys.path.

Batch mapping (TRL's names): per_device_train_batch_size = --micro-batch-size;
gradient_accumulation_steps = rollout / micro, so TRL's batch_size (prompts per episode) =
--rollout-batch-size; num_mini_batches = rollout / --mini-batch-size; local_rollout_forward_batch_size
= --micro-batch-size (generation and the scoring forwards go in chunks of that many rows);
stop_token_id = the id of "<|end|>"; kl_coef, temperature, response_length, num_ppo_epochs, seed,
learning_rate as given; TRL defaults elsewhere (k1 KL estimator, cliprange 0.2, vf_coef 0.1,
gamma 1, lam 0.95, no reward whitening, no missing-EOS penalty).

Adaptations (TRL's PPOTrainer code itself is not edited):
  1. No transformers tokenizer: the prompts are tokenized here with sentencepiece, exactly as the
     demo chat template renders them (BOS, then "<|system|>\\nS<|end|>\\n<|user|>\\nU<|end|>\\n
     <|assistant|>\\n"), and left-padded with pad id 3 by our own collator (TRL expects left-padded
     queries). processing_class is a small stand-in carrying pad_token_id / eos_token_id.
  2. Optimizer steps per minibatch: TRL derives its rollout size as per_device_train_batch_size x
     gradient_accumulation_steps and gives the same gradient_accumulation_steps to its Accelerator,
     so with micro 16, rollout 32, minibatch 16 accelerate would accumulate over both minibatches
     and step once per episode. After construction the Accelerator's gradient_accumulation_steps is
     set to minibatch / micro (1 here), so AdamW steps once per minibatch, as Ferry does.
  3. Generation stops at "<|end|>" or EOS (id 2), like Ferry: TRL sets the policy's
     generation_config.eos_token_id to stop_token_id; we widen it to [<|end|>, EOS] after
     construction. (TRL's own generate() call uses a fresh GenerationConfig without
     eos_token_id; transformers fills that from the model's generation_config.)
  4. Quiet: no tqdm / printer callbacks, report_to none, no checkpoints, no sample generations;
     eval_dataset is the train set only because PPOTrainer builds an eval DataLoader (never used).
Patches for transformers 5.24 / torch 2.11 / accelerate 1.16: none were needed. PPOTrainer 0.24
constructs, generates, scores and trains unchanged. Checked by hand: generation stops at <|end|>
(rows are padded with id 3 after it), AdamW steps twice per episode (once per minibatch), and the
`rewards[[actual_start, actual_end]] += scores` line that torch 2.11 warns about still indexes
as a tuple (the old, intended meaning). Warnings are silenced to keep the output to the timings.
Total also holds what TRL does between the phases (next dataloader batch, its gc.collect() calls).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

TRL_VERSION = "0.24.0"


def trl_dir():
    deps = os.environ.get("FERRY_DEPS") or os.path.join(os.path.expanduser("~"), ".cache", "ferry")
    return os.path.join(deps, "trl-" + TRL_VERSION.rsplit(".", 1)[0])


def ensure_trl():
    """Puts TRL 0.24 first on sys.path, installing it (no dependencies) on first use."""
    target = trl_dir()
    stamp = os.path.join(target, "trl-%s.dist-info" % TRL_VERSION)
    if not os.path.isdir(stamp):
        print("bench_ppo_trl: installing trl==%s into %s" % (TRL_VERSION, target), file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "--no-deps", "--upgrade", "--target", target, "trl==" + TRL_VERSION])
    sys.path.insert(0, target)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", default="runs/demo/sft/final")
    p.add_argument("--reward", default="runs/demo/rm/final")
    p.add_argument("--prompts", default="data/prompts_train.jsonl")
    p.add_argument("--tokenizer", default="data/tokenizer.model")
    p.add_argument("--rollout-batch-size", type=int, default=32)
    p.add_argument("--micro-batch-size", type=int, default=16)
    p.add_argument("--mini-batch-size", type=int, default=16)
    p.add_argument("--response-length", type=int, default=16)
    p.add_argument("--ppo-epochs", type=int, default=1)
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--kl-coef", type=float, default=0.05)
    p.add_argument("--learning-rate", type=float, default=1e-5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def main():
    args = parse_args()
    if args.rollout_batch_size % args.mini_batch_size or args.mini_batch_size % args.micro_batch_size:
        sys.exit("rollout batch must be a multiple of the minibatch, the minibatch of the micro batch")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ensure_trl()
    warnings.filterwarnings("ignore")

    import torch
    torch.set_num_threads(args.threads)
    import sentencepiece as spm
    import transformers
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    import trl
    assert trl.__version__ == TRL_VERSION, (trl.__version__, trl.__file__)
    from trl import PPOConfig, PPOTrainer
    from trl.trainer import ppo_trainer as trl_ppo

    transformers.logging.set_verbosity_error()

    # --- prompts, tokenized with the demo chat template -------------------------------------
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    bos, eos, pad = 1, 2, 3
    end_id = sp.piece_to_id("<|end|>")
    assert sp.id_to_piece(end_id) == "<|end|>", "tokenizer has no <|end|> piece"
    rows = []
    with open(args.prompts) as f:
        for line in f:
            if not line.strip():
                continue
            msgs = {m["role"]: m["content"] for m in json.loads(line)["messages"]}
            text = "<|system|>\n%s<|end|>\n<|user|>\n%s<|end|>\n<|assistant|>\n" % (msgs.get("system", ""),
                                                                                   msgs["user"])
            rows.append([bos] + sp.encode(text))
    train_dataset = Dataset.from_dict({"input_ids": rows})

    def collate(batch):  # left padding with the pad id (TRL appends responses on the right)
        width = max(len(b["input_ids"]) for b in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        for r, b in enumerate(batch):
            ids[r, width - len(b["input_ids"]):] = torch.tensor(b["input_ids"])
        return {"input_ids": ids, "attention_mask": (ids != pad).long()}

    class SpTokenizer:  # what PPOTrainer.train reads of its processing_class
        pad_token_id, eos_token_id, bos_token_id = pad, eos, bos

        def batch_decode(self, seqs, skip_special_tokens=False):
            return [sp.decode([int(t) for t in s if int(t) != pad]) for s in seqs]

        def save_pretrained(self, *a, **k):
            pass

    # --- models -----------------------------------------------------------------------------
    def load_lm(path):
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)

    def load_rm(path):
        return AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32, num_labels=1)

    policy, ref_policy = load_lm(args.policy), load_lm(args.policy)
    reward_model, value_model = load_rm(args.reward), load_rm(args.reward)

    work = tempfile.mkdtemp(prefix="bench_ppo_trl.")
    config = PPOConfig(
        output_dir=work,
        per_device_train_batch_size=args.micro_batch_size,
        gradient_accumulation_steps=args.rollout_batch_size // args.micro_batch_size,
        num_mini_batches=args.rollout_batch_size // args.mini_batch_size,
        local_rollout_forward_batch_size=args.micro_batch_size,
        total_episodes=args.episodes * args.rollout_batch_size,
        response_length=args.response_length,
        num_ppo_epochs=args.ppo_epochs,
        temperature=args.temperature,
        kl_coef=args.kl_coef,
        learning_rate=args.learning_rate,
        stop_token_id=end_id,
        seed=args.seed,
        num_sample_generations=0,
        save_strategy="no",
        report_to="none",
        logging_strategy="no",
        use_cpu=True,
        bf16=False,
        fp16=False,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )

    # --- phase timers, wrapped around TRL's own functions -----------------------------------
    marks = {}
    real_batch_generation, real_forward = trl_ppo.batch_generation, trl_ppo.forward

    def timed_batch_generation(*a, **k):
        start = time.perf_counter()
        out = real_batch_generation(*a, **k)
        marks["gen_start"], marks["gen_end"] = start, time.perf_counter()
        return out

    def timed_forward(model, *a, **k):
        if isinstance(model, trl_ppo.PolicyAndValueWrapper) and "learn_start" not in marks:
            marks["learn_start"] = time.perf_counter()
        return real_forward(model, *a, **k)

    trl_ppo.batch_generation, trl_ppo.forward = timed_batch_generation, timed_forward

    totals = []

    class EpisodeTimer(TrainerCallback):
        def on_train_begin(self, *a, **k):
            marks.clear()
            marks["episode_start"] = time.perf_counter()

        def on_step_end(self, *a, **k):
            now = time.perf_counter()
            total = now - marks["episode_start"]
            gen = marks["gen_end"] - marks["gen_start"]
            score = marks["learn_start"] - marks["gen_end"]
            learn = now - marks["learn_start"]
            totals.append(total)
            print("trl episode %d: generate %.3f s, score %.3f s, learn %.3f s, total %.3f s"
                  % (len(totals), gen, score, learn, total), flush=True)
            marks.clear()
            marks["episode_start"] = time.perf_counter()

    torch.manual_seed(args.seed)
    trainer = PPOTrainer(
        args=config,
        processing_class=SpTokenizer(),
        model=policy,
        ref_model=ref_policy,
        reward_model=reward_model,
        value_model=value_model,
        train_dataset=train_dataset,
        eval_dataset=train_dataset,
        data_collator=collate,
    )
    # Adaptation 2: one optimizer step per minibatch of --mini-batch-size rows.
    trainer.accelerator.gradient_accumulation_steps = args.mini_batch_size // args.micro_batch_size
    # Adaptation 3: stop at <|end|> or EOS.
    policy.generation_config.eos_token_id = [end_id, eos]
    policy.generation_config.pad_token_id = pad
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    trainer.add_callback(EpisodeTimer())

    print("trl %s (transformers %s, torch %s): rollout %d, micro %d, minibatch %d, %d new tokens, "
          "%d ppo epoch(s), threads %d, %d prompts"
          % (trl.__version__, transformers.__version__, torch.__version__, args.rollout_batch_size,
             args.micro_batch_size, args.mini_batch_size, args.response_length, args.ppo_epochs,
             torch.get_num_threads(), len(rows)), flush=True)
    try:
        trainer.train()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rest = totals[1:] or totals
    print("trl mean episode seconds (excluding the first): %.4f" % (sum(rest) / len(rest)), flush=True)


if __name__ == "__main__":
    main()
