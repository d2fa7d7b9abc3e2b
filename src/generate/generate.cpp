// The prefill + decode loop.
#include "src/generate/generate.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "src/generate/fixed_decode_step.h"
#include "src/generate/packed_prefill.h"
#include "src/generate/prompt_batch.h"
#include "src/generate/stop_strings.h"
#include "src/model/kv_cache.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

// Appends this step's tokens (b, for the batch rows `rows`) to those rows' `generated` text and
// returns (b) bool: true for rows whose decoded continuation now contains a stop string. Checked
// every step, so the hit is at the token that completes the string.
torch::Tensor stop_string_hits(const torch::Tensor& next, const torch::Tensor& rows,
                               std::vector<std::vector<int64_t>>& generated, const Tokenizer& tokenizer,
                               const StopStrings& stop_strings) {
  const torch::Tensor ids = next.cpu().contiguous(), on = rows.cpu().contiguous();
  std::vector<int64_t> hits(static_cast<size_t>(ids.numel()), 0);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    std::vector<int64_t>& text = generated[static_cast<size_t>(on.data_ptr<int64_t>()[i])];
    text.push_back(ids.data_ptr<int64_t>()[i]);
    hits[static_cast<size_t>(i)] = stop_strings.find_in(tokenizer.decode(text)) != std::string::npos;
  }
  return torch::tensor(hits, torch::kLong).to(next.device()).to(torch::kBool);
}

// The prompts' final hidden states at their last tokens (B, C), their keys and values stored in
// the empty `cache`: packed (packed_prefill.h) when that saves rows and no sliding window would
// count the packed columns, else left-padded as given.
torch::Tensor prefill(LlamaForCausalLMImpl& model, const torch::Tensor& ids, const torch::Tensor& mask, KvCache& cache) {
  c10::InferenceMode inference;  // as FixedDecodeStep::run: no autograd bookkeeping per op
  const int64_t window = model.config().sliding_window;
  if (window <= 0 || ids.size(1) <= window) {
    if (const std::optional<PackedPrefill> packed = pack_prefill(ids, mask)) {
      cache.scatter_next(packed->token_index, packed->cache_rows, packed->cache_columns, packed->input_ids.size(0),
                         ids.size(1));
      const torch::Tensor hidden = model.model(packed->input_ids, packed->attention, packed->position_ids, &cache);
      return hidden.reshape({-1, hidden.size(-1)}).index_select(0, packed->last_index);
    }
  }
  return model.model(ids, mask, torch::Tensor(), &cache).select(1, -1);
}

}  // namespace

GenerateResult generate(LlamaForCausalLMImpl& model, const at::Tensor& input_ids, const at::Tensor& attention_mask,
                        const GenerateOptions& options) {
  torch::NoGradGuard no_grad;
  check_sampling_options(options.sampling);
  if (options.max_new_tokens < 1) {
    throw UserError(detail::concat("max_new_tokens must be at least 1, got ", options.max_new_tokens));
  }
  if (!input_ids.defined() || input_ids.dim() != 2 || input_ids.size(0) == 0 || input_ids.size(1) == 0) {
    throw InputError("generate: input_ids must be a non-empty (B, T) tensor of token ids");
  }
  const torch::Tensor weight = model.model->embed_tokens->weight;
  const auto device = weight.device();
  const int64_t batch = input_ids.size(0), prompt_length = input_ids.size(1);
  const torch::Tensor prompt_ids = input_ids.to(device, at::kLong);
  torch::Tensor mask = attention_mask.defined() ? attention_mask.to(device, at::kLong) : torch::ones_like(prompt_ids);
  if (mask.sizes() != prompt_ids.sizes()) throw InputError("generate: attention_mask must have the shape of input_ids");
  if (!(mask.sum(1) > 0).all().item<bool>()) throw InputError("generate: a prompt has no tokens (all padding)");
  FERRY_CHECK(options.row_generators == nullptr || static_cast<int64_t>(options.row_generators->size()) == batch,
              "generate: ", options.row_generators ? options.row_generators->size() : 0, " row generators for ",
              batch, " rows");

  std::vector<int64_t> stop_ids = options.eos_token_ids;
  stop_ids.insert(stop_ids.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());
  const torch::Tensor stop = torch::tensor(stop_ids, torch::kLong).to(device);
  const StopStrings stop_strings(options.stop_strings);
  if (!stop_strings.empty() && options.tokenizer == nullptr) {
    throw UserError("generate: stop_strings need a tokenizer to decode the generated text");
  }
  std::vector<std::vector<int64_t>> generated(stop_strings.empty() ? 0 : static_cast<size_t>(batch));
  const int64_t pad = options.pad_token_id >= 0        ? options.pad_token_id
                      : !options.eos_token_ids.empty() ? options.eos_token_ids.front()
                                                       : 0;
  at::Generator own_generator = make_sampling_generator(options.seed);
  at::Generator& generator = options.generator != nullptr ? *options.generator : own_generator;
  const double temperature = policy_temperature(options.sampling.greedy, options.sampling.temperature);

  // The KV cache is sized for every position up front: past the positions the model was trained
  // for it would only buy memory (an absurd max_new_tokens would exhaust it) for text it never learnt.
  const int64_t positions = model.config().max_position_embeddings;
  if (prompt_length + options.max_new_tokens > positions) {
    throw UserError(detail::concat("generate: the prompt (", prompt_length, " tokens with padding) plus max_new_tokens (",
                                   options.max_new_tokens, ") needs ", prompt_length + options.max_new_tokens,
                                   " positions, more than the model's max_position_embeddings (", positions,
                                   "); lower max_new_tokens (generation.max_new_tokens, --max-new-tokens) or shorten "
                                   "the prompt (data.max_length)"));
  }
  // Rows with the same prompt (GRPO's and PPO's copies of one prompt) are prefilled once and
  // share its keys and values: the cache is then copied out to every row.
  const SharedPrompts shared = shared_prompts(prompt_ids, mask);
  const torch::Tensor unique = shared.unique_rows.to(device);
  const bool all_distinct = unique.numel() == batch;
  KvCache cache(model.config(), unique.numel(), prompt_length + options.max_new_tokens, weight.scalar_type(), device);
  torch::Tensor hidden = prefill(model, all_distinct ? prompt_ids : prompt_ids.index_select(0, unique),
                                 all_distinct ? mask : mask.index_select(0, unique), cache);  // (B, C)
  if (!all_distinct) {
    const torch::Tensor copies = shared.prefill_row.to(device);
    cache = cache.select_rows(copies);
    hidden = hidden.index_select(0, copies);
  }
  // Decoding at fixed shapes (fixed_decode_step.h): CUDA graphs replay it on a GPU.
  FixedDecodeStep decoder(model, cache, mask, options.cuda_graphs);
  // Rows still generating, as indices into the batch; a row that stops leaves the batch (with its
  // cache rows), so the rest cost what they would alone. A row draws from its own generator
  // (row_generators), so what it samples does not depend on which rows are left beside it.
  torch::Tensor alive = torch::arange(batch, torch::TensorOptions().dtype(torch::kLong).device(device));
  std::vector<at::Generator> alive_generators;
  if (options.row_generators != nullptr) alive_generators = *options.row_generators;
  std::vector<torch::Tensor> new_tokens, new_mask, logprobs;
  torch::Tensor logits = model.logits(hidden).to(torch::kFloat);  // (b, V), b = rows alive
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const torch::Tensor next = options.row_generators != nullptr
                                   ? choose_next_tokens(logits, options.sampling, alive_generators)
                                   : choose_next_tokens(logits, options.sampling, generator);  // (b)
    const torch::Tensor policy_logprobs = (logits / temperature).log_softmax(-1);  // (b, V)
    const torch::Tensor chosen = policy_logprobs.gather(1, next.unsqueeze(1)).squeeze(1);
    // Rows that stopped earlier get pad (masked out, log-prob 0); the stopping token itself counts.
    new_tokens.push_back(torch::full({batch}, pad, next.options()).index_copy_(0, alive, next));
    new_mask.push_back(torch::zeros({batch}, next.options()).index_fill_(0, alive, 1));
    logprobs.push_back(torch::zeros({batch}, chosen.options()).index_copy_(0, alive, chosen));
    torch::Tensor stopped = torch::isin(next, stop);
    if (!stop_strings.empty()) {
      stopped = stopped | stop_string_hits(next, alive, generated, *options.tokenizer, stop_strings);
    }
    if (step + 1 == options.max_new_tokens) break;
    const torch::Tensor going = ~stopped;
    torch::Tensor next_input = next;
    if (!going.all().item<bool>()) {
      const torch::Tensor keep = going.nonzero().flatten();  // (b')
      if (keep.numel() == 0) break;
      alive = alive.index_select(0, keep);
      next_input = next.index_select(0, keep);
      decoder.keep_rows(keep);
      if (!alive_generators.empty()) {
        std::vector<at::Generator> kept;
        const torch::Tensor on_host = keep.cpu();
        for (int64_t i = 0; i < on_host.numel(); ++i) {
          kept.push_back(alive_generators[static_cast<size_t>(on_host.data_ptr<int64_t>()[i])]);
        }
        alive_generators = std::move(kept);
      }
    }
    logits = decoder.step(next_input);  // (b', V)
  }
  GenerateResult result;
  result.prompt_length = prompt_length;
  result.tokens = torch::cat({prompt_ids, torch::stack(new_tokens, 1)}, 1);
  result.attention_mask = torch::cat({attention_mask.defined() ? attention_mask.to(device, at::kLong) : torch::ones_like(prompt_ids),
                                      torch::stack(new_mask, 1)}, 1);
  result.logprobs = torch::stack(logprobs, 1);
  return result;
}

}  // namespace ferry
