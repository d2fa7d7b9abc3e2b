// The typed configuration of a Ferry run: one struct per section, defaults in one place.
//
// Each section lists its fields once, in visit(), with a one-line description; the same list drives
// strict parsing (config_io.h), `--set` overrides, `ferry config show` and configs/README.md.
// Key names follow ColossalChat / Hugging Face usage. Relative paths are relative to the working
// directory the command runs in (the scripts run from the repository root).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config_enum.h"

namespace ferry {

// A memory size in bytes, written "8GiB" / "512MiB" / "1.5GB" in configs. 0 means "not set".
struct ByteSize {
  uint64_t bytes = 0;
  bool operator==(const ByteSize&) const = default;
};

// A free-form mapping (tokenizer.chat_template_kwargs: {enable_thinking: false}), kept as compact
// JSON text of an object; YAML scalars keep their YAML type (true, 3, 0.5, null; quoted: text).
struct KeywordMap {
  std::string json = "{}";
  bool operator==(const KeywordMap&) const = default;
};

struct ModelConfig {
  std::string path;    // Hugging Face model folder to start from
  std::string config;  // config.json of a model initialised from scratch (when path is empty)

  template <class V>
  void visit(V& v) {
    v("path", path,
      "model to start from: a Hugging Face folder (config.json + *.safetensors), a .gguf file, ollama:NAME[:TAG] or "
      "ORG/NAME from the local Hugging Face cache");
    v("config", config, "config.json for a model initialised from scratch, used when path is empty");
  }
};

struct TokenizerConfig {
  std::string path;                    // tokenizer.model or tokenizer.json; empty: model.path's folder
  std::string chat_template = "auto";  // the template also decides BOS (its `bos` key)
  KeywordMap chat_template_kwargs;     // extra variables for a Jinja template

  template <class V>
  void visit(V& v) {
    v("path", path, "SentencePiece tokenizer.model or Hugging Face tokenizer.json; empty means the model.path folder's");
    v("chat_template", chat_template,
      "auto (the tokenizer folder's own Jinja chat template), jinja:NAME (one of its named templates), a .jinja "
      "file, a shipped template name (configs/templates) or a .yaml/.json file");
    v("chat_template_kwargs", chat_template_kwargs,
      "extra variables for a Jinja chat template, e.g. {enable_thinking: false} (apply_chat_template's kwargs)");
  }
};

struct DataConfig {
  std::string train_file;
  std::string eval_file;
  std::string prompt_file;
  double eval_fraction = 0.0;
  int64_t max_length = 512;
  bool packing = false;
  bool shuffle = true;
  bool skip_bad_lines = false;
  int64_t max_samples = 0;
  DataFormat format = DataFormat::auto_;
  KeywordMap columns;  // Ferry/TRL field name -> the file's column name
  KeywordMap tags;     // ShareGPT role/content tag names, as LLaMA-Factory's dataset_info "tags"

  template <class V>
  void visit(V& v) {
    v("train_file", train_file,
      "training data (SFT conversations, preference pairs, ... by stage): .jsonl, .json, .parquet, a `datasets` "
      "folder or hf:ORG/NAME[:SPLIT] from the local Hugging Face cache; formats in docs/data.md");
    v("eval_file", eval_file, "evaluation data, as train_file; empty: split eval_fraction off the training file");
    v("prompt_file", prompt_file, "prompts (PPO/GRPO rollouts, `ferry eval`), as train_file, optional gt_answer");
    v("eval_fraction", eval_fraction, "fraction of train_file held out for eval when eval_file is empty");
    v("max_length", max_length, "maximum tokens per sequence; longer samples drop whole rounds");
    v("packing", packing, "pack several samples per sequence (attention stays within each sample)");
    v("shuffle", shuffle, "shuffle samples each epoch (seeded by train.seed)");
    v("skip_bad_lines", skip_bad_lines, "skip and count malformed rows (lines) instead of stopping");
    v("max_samples", max_samples, "use at most this many samples (0: all)");
    v("format", format,
      "auto (each row's keys say: messages, TRL prompt/completion/chosen/rejected/text, ColossalChat context, "
      "Alpaca instruction, ShareGPT conversations), alpaca or sharegpt");
    v("columns", columns,
      "the file's column for each field Ferry reads (docs/data.md), e.g. {prompt: question, completion: answer}; "
      "LLaMA-Factory's dataset_info names: instruction for its prompt, input for query, output for response");
    v("tags", tags,
      "ShareGPT tag names, e.g. {role_tag: from, content_tag: value, user_tag: human, assistant_tag: gpt} "
      "(LLaMA-Factory's dataset_info tags)");
  }
};

struct TrainConfig {
  int64_t seed = 42;
  Device device = Device::auto_;
  Precision precision = Precision::fp32;
  double learning_rate = 2e-5;
  LrSchedule lr_scheduler = LrSchedule::cosine;
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double max_grad_norm = 1.0;
  int64_t micro_batch_size = 4;
  int64_t grad_accumulation = 1;
  int64_t max_steps = -1;
  int64_t epochs = 1;
  bool gradient_checkpointing = false;
  bool activation_offload = false;
  int64_t logits_chunk = -1;
  bool share_prompts = true;
  int64_t eval_every = 0;
  int64_t save_every = 0;
  std::string resume;
  double fp16_initial_scale = 65536.0;

  template <class V>
  void visit(V& v) {
    v("seed", seed, "seed for initialisation, shuffling, dropout and sampling");
    v("device", device, "auto (cuda when a GPU is visible), cpu or cuda");
    v("precision", precision, "fp32, bf16 or fp16 (fp16 uses dynamic loss scaling)");
    v("learning_rate", learning_rate, "peak learning rate");
    v("lr_scheduler", lr_scheduler, "cosine, linear or constant after warmup");
    v("warmup_steps", warmup_steps, "linear warmup steps");
    v("min_lr_ratio", min_lr_ratio, "final learning rate as a fraction of the peak (cosine/linear)");
    v("weight_decay", weight_decay, "decoupled weight decay (not applied to norms and biases)");
    v("adam_beta1", adam_beta1, "AdamW beta1");
    v("adam_beta2", adam_beta2, "AdamW beta2");
    v("adam_eps", adam_eps, "AdamW epsilon");
    v("max_grad_norm", max_grad_norm, "clip the global gradient norm to this (0: no clipping)");
    v("micro_batch_size", micro_batch_size, "sequences per forward/backward");
    v("grad_accumulation", grad_accumulation, "micro-batches per optimizer step");
    v("max_steps", max_steps, "optimizer steps to run (-1: run `epochs` epochs)");
    v("epochs", epochs, "passes over the training data when max_steps is -1");
    v("gradient_checkpointing", gradient_checkpointing, "recompute each block's activations in backward");
    v("activation_offload", activation_offload,
      "keep the checkpointed blocks' inputs in host memory between forward and backward (needs "
      "gradient_checkpointing, or offload.policy params/auto)");
    v("logits_chunk", logits_chunk,
      "token rows of LM-head logits the losses compute at a time (-1: auto, a chunk's logits no larger than the "
      "hidden states; 0: all at once)");
    v("share_prompts", share_prompts,
      "PPO/GRPO: the responses to one prompt in a micro-batch go through one forward that holds the prompt once "
      "(the same log-probs; false: a forward per row)");
    v("eval_every", eval_every, "evaluate every N steps (0: only at the end)");
    v("save_every", save_every, "checkpoint every N steps (0: only at the end)");
    v("resume", resume, "empty, auto (latest checkpoint in output.dir) or a checkpoint folder");
    v("fp16_initial_scale", fp16_initial_scale, "initial dynamic loss scale for fp16");
  }
};

struct LoraConfig {
  int64_t rank = 0;
  double alpha = 16.0;
  double dropout = 0.0;
  std::vector<std::string> target_modules{"q_proj", "k_proj", "v_proj", "o_proj"};
  LoraExport export_as = LoraExport::merged;
  BaseQuantization quantize_base = BaseQuantization::none;
  bool double_quant = true;

  template <class V>
  void visit(V& v) {
    v("rank", rank, "LoRA rank (0: full fine-tuning)");
    v("alpha", alpha, "LoRA alpha; the update is scaled by alpha / rank");
    v("dropout", dropout, "dropout on the LoRA input");
    v("target_modules", target_modules,
      "projections to adapt: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj (Phi-3 fuses them: qkv_proj "
      "gate_up_proj, which q/k/v and gate/up also name there)");
    v("export", export_as, "merged (into the base weights) or adapter (PEFT format)");
    v("quantize_base", quantize_base,
      "none, nf4 (QLoRA: the decoder layers' frozen projections held in bitsandbytes' 4-bit NormalFloat, "
      "dequantised per matmul; a model.path bitsandbytes saved in 4 bits is used as stored), int8 (bitsandbytes' "
      "LLM.int8 row-wise storage without outliers, ~1 byte per weight) or gguf (model.path a .gguf file or "
      "ollama:NAME: each projection kept in the file's own ggml blocks, e.g. Q4_1 at 0.625 bytes per weight, "
      "dequantised per matmul; nf4 and int8 quantise a GGUF model's dequantised weights); needs rank > 0");
    v("double_quant", double_quant,
      "with quantize_base nf4: also quantise the NF4 block scales to 8 bits (bitsandbytes' "
      "bnb_4bit_use_double_quant; 0.516 instead of 0.5625 bytes per weight)");
  }
};

struct OffloadConfig {
  OffloadPolicy policy = OffloadPolicy::none;
  ByteSize gpu_memory;
  ByteSize host_memory;
  ByteSize chunk_size;
  double pcie_bandwidth_gbps = 0.0;
  int64_t cpu_threads = 0;
  int64_t prefetch = 1;
  bool overlap_step = false;
  OptimizerState optimizer_state = OptimizerState::fp32;
  MasterWeights master_weights = MasterWeights::fp32;
  StateTier optimizer_state_tier = StateTier::host;
  StateTier params_tier = StateTier::host;
  std::string nvme_dir;
  ByteSize nvme_memory;

  template <class V>
  void visit(V& v) {
    v("policy", policy, "none, optimizer (ZeRO-Offload), params (page weights too) or auto (planner)");
    v("gpu_memory", gpu_memory, "device memory budget, e.g. 8GiB (0: the whole device)");
    v("host_memory", host_memory,
      "host memory budget for the offloaded weights, master weights, moments and gradients, e.g. 32GiB "
      "(0: what /proc/meminfo says is available, less 10%)");
    v("chunk_size", chunk_size, "parameter chunk size (0: one chunk per transformer block)");
    v("pcie_bandwidth_gbps", pcie_bandwidth_gbps, "host<->device bandwidth for the planner, GB/s (0: measured on a GPU, else 12)");
    v("cpu_threads", cpu_threads, "threads for the CPU optimizer (0: all cores)");
    v("prefetch", prefetch, "blocks paged in ahead of use under the params policy");
    v("overlap_step", overlap_step,
      "run the CPU AdamW on each chunk during backward, as soon as its gradients are complete "
      "(needs train.max_grad_norm 0, not fp16)");
    v("optimizer_state", optimizer_state,
      "Adam moments on the host in fp32 or int8 (block-wise 8-bit: 2 instead of 8 bytes per parameter; "
      "needs policy optimizer, params or auto)");
    v("master_weights", master_weights,
      "master weights on the host: fp32, bf16_kahan (the bf16 weights plus a bf16 compensation: 4 instead of "
      "6 bytes per parameter) or bf16_stochastic (the bf16 weights alone, each update rounded stochastically, "
      "seeded by train.seed: 2 bytes per parameter); the bf16 ones need train.precision bf16 and policy "
      "optimizer, params or auto");
    v("optimizer_state_tier", optimizer_state_tier,
      "where the CPU optimizer's state (moments, master weights) lives: host (memory) or nvme (a working file "
      "under offload.nvme_dir, streamed through a few staging buffers with direct IO while the CPU AdamW runs; "
      "needs policy optimizer, params or auto)");
    v("params_tier", params_tier,
      "where the parameter chunks' host copies live: host (memory) or nvme (a working file under "
      "offload.nvme_dir, mapped into the process and paged in by the kernel as chunks are used, each chunk's "
      "pages dropped after use; needs policy optimizer, params or auto)");
    v("nvme_dir", nvme_dir,
      "folder on the NVMe drive for the nvme tier's working file (created and deleted by the run, never a "
      "checkpoint; it must exist)");
    v("nvme_memory", nvme_memory, "NVMe budget for the nvme tier, e.g. 200GiB (0: the free space of nvme_dir less 10%)");
  }
};

struct GenerationConfig {
  int64_t max_new_tokens = 128;
  bool greedy = false;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  std::vector<std::string> stop_strings;
  bool cuda_graphs = true;
  int64_t max_batch_rows = 0;

  template <class V>
  void visit(V& v) {
    v("max_new_tokens", max_new_tokens, "tokens to generate at most per prompt");
    v("greedy", greedy, "pick the most likely token (ignores temperature, top_k, top_p)");
    v("temperature", temperature, "sampling temperature");
    v("top_k", top_k, "sample from the k most likely tokens (0: all)");
    v("top_p", top_p, "nucleus sampling mass (1: all)");
    v("stop_strings", stop_strings, "extra strings that end generation (EOS always does)");
    v("cuda_graphs", cuda_graphs, "on a GPU, replay the decode step as a CUDA graph per batch-size bucket (the same "
      "tokens; false: launch its kernels one by one)");
    v("max_batch_rows", max_batch_rows, "rows a rollout decodes at once (0: all of them); the others wait and "
      "join as rows end (continuous batching: the same tokens, a smaller KV cache)");
  }
};

struct PpoConfig {
  std::string reward_model;
  std::string critic_model;
  int64_t rollout_batch_size = 16;
  int64_t ppo_epochs = 1;
  double clip_eps = 0.2;
  double value_clip_eps = 0.2;
  double vf_coef = 0.1;
  double kl_coef = 0.05;
  KlEstimator kl_estimator = KlEstimator::k1;
  double kl_target = 0.0;
  double kl_horizon = 10000.0;
  double gamma = 1.0;
  double lam = 0.95;
  bool whiten_advantages = true;
  double reward_clip = 10.0;
  bool normalize_reward = false;
  double missing_eos_penalty = 0.0;
  double entropy_coef = 0.0;
  double ptx_coef = 0.0;
  double critic_learning_rate = 9e-6;
  int64_t num_episodes = 1;
  AdvantageEstimator advantage_estimator = AdvantageEstimator::gae;
  int64_t num_generations = 1;

  template <class V>
  void visit(V& v) {
    v("reward_model", reward_model, "reward model folder (from train-rm), frozen: the reward when `rewards` is empty, "
      "and the critic's start");
    v("critic_model", critic_model,
      "critic initialisation folder: a reward model (its score head becomes the value head) or a causal LM "
      "(a fresh head); empty: ppo.reward_model, else the model reward's folder");
    v("rollout_batch_size", rollout_batch_size, "prompts generated per rollout (one episode)");
    v("ppo_epochs", ppo_epochs, "optimisation passes over each rollout, in minibatches of micro_batch_size x grad_accumulation");
    v("clip_eps", clip_eps, "policy ratio clip");
    v("value_clip_eps", value_clip_eps, "value function clip around the rollout's values");
    v("vf_coef", vf_coef, "weight of the value loss");
    v("kl_coef", kl_coef, "per-token KL penalty against the reference (initial value when kl_target > 0)");
    v("kl_estimator", kl_estimator, "k1 (log-ratio), k2 (half its square) or k3 (ratio - 1 - log-ratio)");
    v("kl_target", kl_target, "adaptive KL controller's target KL per response (0: kl_coef stays fixed)");
    v("kl_horizon", kl_horizon, "adaptive KL controller's horizon in responses");
    v("gamma", gamma, "discount");
    v("lam", lam, "GAE lambda");
    v("whiten_advantages", whiten_advantages, "normalise advantages to mean 0, std 1 over each rollout");
    v("reward_clip", reward_clip, "scores are clipped to +-reward_clip (0: no clip)");
    v("normalize_reward", normalize_reward, "divide scores by running statistics (mean, std) of all scores so far");
    v("missing_eos_penalty", missing_eos_penalty, "subtracted from the score of a response that hit max_new_tokens "
      "without ending (0: none)");
    v("entropy_coef", entropy_coef, "entropy bonus weight (0: none)");
    v("ptx_coef", ptx_coef, "weight of an SFT loss on data.train_file mixed into each policy step (0: none)");
    v("critic_learning_rate", critic_learning_rate, "critic learning rate");
    v("num_episodes", num_episodes, "passes over the prompt file when train.max_steps is 0 (max_steps counts rollouts)");
    v("advantage_estimator", advantage_estimator,
      "gae (a critic learns values), rloo (leave-one-out baseline) or reinforce_baseline (REINFORCE++-baseline: "
      "the group mean); rloo and reinforce_baseline need no critic and num_generations >= 2");
    v("num_generations", num_generations, "responses sampled per prompt in a rollout (the group rloo and "
      "reinforce_baseline take their baseline from)");
  }
};

// GRPO: names and defaults as TRL's GRPOConfig.
struct GrpoConfig {
  int64_t num_generations = 8;
  int64_t generation_batch_size = 64;
  int64_t num_iterations = 1;
  double epsilon = 0.2;
  double epsilon_high = 0.0;
  double beta = 0.0;
  GrpoLoss loss_type = GrpoLoss::dapo;
  RewardScaling scale_rewards = RewardScaling::group;
  ImportanceSampling importance_sampling_level = ImportanceSampling::token;
  bool mask_truncated_completions = false;
  bool use_bias_correction_kl = true;
  double sapo_temperature_pos = 1.0;
  double sapo_temperature_neg = 1.05;
  double vespo_k_pos = 2.0;
  double vespo_lambda_pos = 3.0;
  double vespo_k_neg = 3.0;
  double vespo_lambda_neg = 2.0;
  int64_t num_episodes = 1;

  template <class V>
  void visit(V& v) {
    v("num_generations", num_generations, "completions sampled per prompt (the group advantages are taken within)");
    v("generation_batch_size", generation_batch_size, "completions per rollout, a multiple of num_generations; "
      "learned from in minibatches of train.micro_batch_size x train.grad_accumulation");
    v("num_iterations", num_iterations, "passes over each rollout (old log-probs kept from the rollout)");
    v("epsilon", epsilon, "lower clip of the importance ratio (1 - epsilon)");
    v("epsilon_high", epsilon_high, "upper clip (1 + epsilon_high; DAPO's clip-higher); 0: epsilon; with cispo the "
      "largest importance weight (ScaleRL recommends 5)");
    v("beta", beta, "k3 KL penalty against the reference (0: no reference model is loaded)");
    v("loss_type", loss_type, "grpo (mean of per-sequence means), dapo (mean over the step's tokens), dr_grpo "
      "(sum / (rows x max_new_tokens)), bnpo (mean over the micro-batch's tokens), cispo (clipped importance "
      "weight x A x log-prob), sapo (a soft sigmoid gate instead of the clip), luspo (per-sequence sums; pair "
      "with importance_sampling_level sequence) or vespo (a Gamma weight of the sequence ratio x A x log-prob)");
    v("scale_rewards", scale_rewards, "divide advantages by the group's std (group), the rollout's (batch) or not (none)");
    v("importance_sampling_level", importance_sampling_level,
      "token (one ratio per token) or sequence (GSPO: the mean log-ratio of the sequence)");
    v("mask_truncated_completions", mask_truncated_completions,
      "completions that hit generation.max_new_tokens without ending count no token in the loss");
    v("use_bias_correction_kl", use_bias_correction_kl, "multiply the KL term by the importance ratio (TRL's default)");
    v("sapo_temperature_pos", sapo_temperature_pos, "sapo: the gate's temperature for tokens with a positive advantage");
    v("sapo_temperature_neg", sapo_temperature_neg, "sapo: the gate's temperature for the others");
    v("vespo_k_pos", vespo_k_pos, "vespo: the Gamma weight's power for a non-negative advantage (down-weights ratios < 1)");
    v("vespo_lambda_pos", vespo_lambda_pos, "vespo: its decay for a non-negative advantage (down-weights ratios > 1)");
    v("vespo_k_neg", vespo_k_neg, "vespo: the power for a negative advantage");
    v("vespo_lambda_neg", vespo_lambda_neg, "vespo: the decay for a negative advantage");
    v("num_episodes", num_episodes, "passes over the prompt file when train.max_steps is 0 (max_steps counts rollouts)");
  }
};

// One reward of a PPO or GRPO run; `rewards:` lists them, and the run learns from their weighted sum.
struct RewardConfig {
  RewardKind kind = RewardKind::verifier;
  double weight = 1.0;
  AnswerMatch match = AnswerMatch::exact;
  std::string path;
  std::string command;
  double timeout = 60.0;

  template <class V>
  void visit(V& v) {
    v("kind", kind, "verifier (the response against the prompt's gt_answer: 1 or 0), model (a reward model "
      "folder), command (an external program answering one number per JSON line) or environment (the reward "
      "rollout.environment gives an episode)");
    v("weight", weight, "weight of this reward in the sum");
    v("match", match, "verifier: exact (normalised answer), numeric (the last number, to 1e-6) or contains");
    v("path", path, "model: the reward model folder (from train-rm)");
    v("command", command, "command: run once by /bin/sh -c; reads {\"prompt\", \"response\", \"gt_answer\", "
      "\"completion\", \"row\"} JSON lines on stdin (docs/data.md), answers one number per line on stdout");
    v("timeout", timeout, "command: seconds to wait for each answer");
  }
};

// Multi-turn episodes against an environment program (docs/environments.md): the policy answers,
// the environment replies (tool results, a new user turn) or ends the episode with a reward.
// Without `environment`, a rollout is single-turn: one prompt, one completion.
struct RolloutConfig {
  std::string environment;
  int64_t env_workers = 2;
  double env_timeout = 30.0;
  int64_t max_turns = 4;
  int64_t max_total_tokens = 512;
  ToolCallFormat tool_call_format = ToolCallFormat::auto_;

  template <class V>
  void visit(V& v) {
    v("environment", environment, "command (run by /bin/sh -c) of an environment program speaking JSON lines on "
      "stdin/stdout (docs/environments.md); empty: single-turn rollouts");
    v("env_workers", env_workers, "environment processes started, each serving many episodes");
    v("env_timeout", env_timeout, "seconds an environment may take to answer one request; past it the episode ends "
      "(counted as a timeout) and the process is restarted");
    v("max_turns", max_turns, "assistant turns per episode at most");
    v("max_total_tokens", max_total_tokens, "tokens of an episode after its prompt at most (assistant turns and "
      "environment messages together)");
    v("tool_call_format", tool_call_format, "how tool calls are parsed from an assistant turn: auto (from the chat "
      "template), hermes (<tool_call>{...}</tool_call>), llama3 (JSON or <|python_tag|>), mistral ([TOOL_CALLS]) or "
      "none (the environment gets the raw text)");
  }
};

struct RmConfig {
  double center_rewards_coefficient = 0.0;

  template <class V>
  void visit(V& v) {
    v("center_rewards_coefficient", center_rewards_coefficient,
      "adds coef * mean((r_chosen + r_rejected)^2), keeping rewards centred on 0 (TRL's; 0: off)");
  }
};

struct DpoConfig {
  std::vector<DpoLoss> loss_type{DpoLoss::sigmoid};
  std::vector<double> loss_weights;
  double beta = 0.1;
  double label_smoothing = 0.0;
  double simpo_gamma = 0.5;
  double cpo_alpha = 0.0;
  double discopop_tau = 0.05;
  double ld_alpha = 1.0;
  FDivergence f_divergence_type = FDivergence::reverse_kl;
  double f_alpha_divergence_coef = 0.5;
  DpoReference reference = DpoReference::auto_;
  std::string reference_model;
  bool online = false;
  double missing_eos_penalty = 0.0;

  bool has_loss(DpoLoss loss) const {
    for (DpoLoss l : loss_type) {
      if (l == loss) return true;
    }
    return false;
  }

  template <class V>
  void visit(V& v) {
    v("loss_type", loss_type, "sigmoid (DPO), robust, hinge, ipo, exo_pair, nca_pair, bco_pair, sppo_hard, aot, "
      "aot_unpaired, apo_zero, apo_down, discopop, sigmoid_norm, sft (the chosen answers' NLL alone), simpo "
      "(reference-free) or orpo (reference-free); a list such as [sigmoid, bco_pair, sft] adds the losses with "
      "dpo.loss_weights (MPO; simpo and orpo only alone); formulas in configs/README.md");
    v("loss_weights", loss_weights, "one weight per dpo.loss_type entry (empty: 1 each), e.g. [0.8, 0.2, 1.0]");
    v("beta", beta, "strength of the preference term (DPO's beta; IPO's tau; SimPO's and ORPO's beta)");
    v("label_smoothing", label_smoothing, "sigmoid: conservative DPO's label noise; robust: flip probability in [0, 0.5); "
      "exo_pair: its epsilon (> 0; the EXO paper uses 1e-3); aot, aot_unpaired: label noise");
    v("simpo_gamma", simpo_gamma, "simpo: target reward margin gamma");
    v("cpo_alpha", cpo_alpha, "simpo: weight of the chosen responses' NLL added to the loss (TRL's CPO-SimPO; 0: pure SimPO)");
    v("discopop_tau", discopop_tau, "discopop: temperature of the gate between its logistic and exponential parts");
    v("ld_alpha", ld_alpha, "LD-DPO: weight in [0, 1] of the log-probs of a response's tokens past the shorter "
      "response of its pair, for the policy and the reference (1: plain DPO; 0: only the shared length counts)");
    v("f_divergence_type", f_divergence_type, "the divergence to the reference the log-ratios measure (f-DPO): "
      "reverse_kl (DPO's), forward_kl, js_divergence or alpha_divergence; other than reverse_kl only for sigmoid, "
      "sigmoid_norm, hinge, ipo, exo_pair, robust, discopop and sft");
    v("f_alpha_divergence_coef", f_alpha_divergence_coef, "alpha_divergence: its alpha");
    v("reference", reference,
      "auto (lora_off with LoRA, else precompute), precompute (reference log-probs once before training), "
      "model (a frozen second model) or lora_off (the policy with its adapters switched off)");
    v("reference_model", reference_model, "reference model folder for precompute/model (empty: model.path)");
    v("online", online, "online DPO (TRL's OnlineDPOTrainer): each step samples two answers to each prompt of "
      "data.prompt_file from the policy, ranks them with `rewards:` and learns from the pair; reference: lora_off "
      "or model");
    v("missing_eos_penalty", missing_eos_penalty, "online: subtracted from the reward of an answer that hit "
      "generation.max_new_tokens before its end (TRL's missing_eos_penalty; 0: none)");
  }
};

struct KtoConfig {
  KtoLoss loss_type = KtoLoss::kto;
  double beta = 0.1;
  double desirable_weight = 1.0;
  double undesirable_weight = 1.0;
  DpoReference reference = DpoReference::auto_;
  std::string reference_model;

  template <class V>
  void visit(V& v) {
    v("loss_type", loss_type, "kto (KTO, with the KL estimate from mismatched pairs) or apo_zero_unpaired (APO-zero "
      "for unpaired data, no KL term); formulas in configs/README.md");
    v("beta", beta, "strength of the log-ratio in the sigmoid (KTO's beta)");
    v("desirable_weight", desirable_weight, "weight of the desirable (label true) examples' losses");
    v("undesirable_weight", undesirable_weight, "weight of the undesirable (label false) examples' losses; KTO's "
      "paper keeps desirable_weight x desirable count / (undesirable_weight x undesirable count) in [1, 4/3]");
    v("reference", reference,
      "auto (lora_off with LoRA, else precompute), precompute (reference log-probs once before training), "
      "model (a frozen second model) or lora_off (the policy with its adapters switched off)");
    v("reference_model", reference_model, "reference model folder for precompute/model (empty: model.path)");
  }
};

struct DistillConfig {
  std::string teacher_model;
  double beta = 0.5;
  double lmbda = 0.5;
  double temperature = 1.0;

  template <class V>
  void visit(V& v) {
    v("teacher_model", teacher_model, "the teacher's folder (a Hugging Face causal LM, a .gguf file or ollama:NAME): "
      "frozen, paged by the engine beside the student; it must share the student's tokenizer");
    v("beta", beta, "the generalised Jensen-Shannon divergence's interpolation: 0 KL(teacher || student), 1 "
      "KL(student || teacher), between: the JSD with mixture beta teacher + (1 - beta) student (TRL GKD's beta)");
    v("lmbda", lmbda, "the share of micro-batches whose answers the student samples itself (on-policy); the others "
      "train on data.train_file's answers (TRL GKD's lmbda)");
    v("temperature", temperature, "softmax temperature of both distributions in the divergence (sampling uses "
      "generation.temperature)");
  }
};

struct OutputConfig {
  std::string dir = "runs/ferry";
  int64_t keep_last = 2;

  template <class V>
  void visit(V& v) {
    v("dir", dir, "run folder: checkpoints, metrics, resolved config");
    v("keep_last", keep_last, "checkpoints kept (older ones are deleted; 0: keep all)");
  }
};

struct LoggingConfig {
  int64_t log_every = 1;
  ProgressMode progress = ProgressMode::auto_;
  double line_seconds = 10.0;
  bool tensorboard = true;
  bool jsonl = true;

  template <class V>
  void visit(V& v) {
    v("log_every", log_every, "log metrics every N steps");
    v("progress", progress, "progress bar: auto (on a terminal), always or never");
    v("line_seconds", line_seconds, "without a progress bar (a log file, CI), print a step line on log_every steps "
      "at most once per this many seconds, and at the last step (0: every log_every step)");
    v("tensorboard", tensorboard, "write TensorBoard event files into output.dir");
    v("jsonl", jsonl, "write output.dir/metrics.jsonl");
  }
};

// Data-parallel runs (src/dist): the process group comes from the torchrun environment (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT; `ferry launch` sets it). One process: ignored.
struct DistributedConfig {
  double timeout = 300.0;
  int64_t zero_stage = 0;
  DistributedMode mode = DistributedMode::sync;
  int64_t inner_steps = 50;
  double outer_lr = 1.0;
  double outer_momentum = 0.0;
  PseudoGradient pseudo_gradient = PseudoGradient::fp32;

  template <class V>
  void visit(V& v) {
    v("timeout", timeout, "seconds any collective (and the rendezvous) may wait for the other processes before the "
      "run stops with an error naming them");
    v("zero_stage", zero_stage, "ZeRO sharding over the processes: 0 every process holds everything; 1 each holds "
      "the optimizer state (master weights, Adam moments) of its share of the parameters and updates only those; 2 "
      "also sums each share's gradients on its owner only (a reduce instead of an all-reduce); 3 also keeps each "
      "share's weights on its owner only, sent to the others when they page them in (offload.policy optimizer, "
      "params or auto)");
    v("mode", mode, "sync: the gradients are summed every step; diloco: each process takes inner_steps AdamW steps "
      "on its own batches, then the processes average how far their weights moved (the pseudo-gradient) and take "
      "one outer Nesterov step (for slow links between machines)");
    v("inner_steps", inner_steps, "diloco: local optimizer steps between two synchronisations");
    v("outer_lr", outer_lr, "diloco: learning rate of the outer Nesterov SGD step (1 with momentum 0: the processes' "
      "weights are averaged; the DiLoCo paper's 0.7 and 0.9 are for long pre-training runs)");
    v("outer_momentum", outer_momentum, "diloco: momentum of the outer Nesterov SGD step");
    v("pseudo_gradient", pseudo_gradient, "diloco: how the pseudo-gradient is sent: fp32, bf16 or int8 (one "
      "absmax scale per 256 values)");
  }
};

struct PipelineConfig {
  std::vector<std::string> stages;

  template <class V>
  void visit(V& v) {
    v("stages", stages, "stage config files run in order by `ferry pipeline` (each sets `stage:`)");
  }
};

// A whole run. `stage` states which command a file is for (any: usable by every command).
struct Config {
  Stage stage = Stage::any;
  ModelConfig model;
  TokenizerConfig tokenizer;
  DataConfig data;
  TrainConfig train;
  LoraConfig lora;
  OffloadConfig offload;
  GenerationConfig generation;
  RmConfig rm;
  DpoConfig dpo;
  KtoConfig kto;
  DistillConfig distill;
  PpoConfig ppo;
  GrpoConfig grpo;
  std::vector<RewardConfig> rewards;
  RolloutConfig rollout;
  OutputConfig output;
  LoggingConfig logging;
  DistributedConfig distributed;
  PipelineConfig pipeline;

  template <class V>
  void visit(V& v) {
    v("stage", stage, "the command this file is for: any, sft, rm, dpo, kto, distill, ppo, grpo");
    v.section("model", model);
    v.section("tokenizer", tokenizer);
    v.section("data", data);
    v.section("train", train);
    v.section("lora", lora);
    v.section("offload", offload);
    v.section("generation", generation);
    v.section("rm", rm);
    v.section("dpo", dpo);
    v.section("kto", kto);
    v.section("distill", distill);
    v.section("ppo", ppo);
    v.section("grpo", grpo);
    v.list("rewards", rewards, "PPO/GRPO rewards, summed with their weights: a list of {kind, weight, match, path, "
           "command, timeout} (PPO without it: the model ppo.reward_model; with rollout.environment: the "
           "environment's reward)");
    v.section("rollout", rollout);
    v.section("output", output);
    v.section("logging", logging);
    v.section("distributed", distributed);
    v.section("pipeline", pipeline);
  }
};

}  // namespace ferry
