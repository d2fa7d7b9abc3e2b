// The prefill + decode loop.
#include "src/generate/generate.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>
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

// Appends this step's tokens (b, for the batch rows `rows`) to those rows' `generated` ids and
// returns (b) bool: true for rows whose decoded continuation now contains a stop string. Checked
// every step, so the hit is at the token that completes the string.
torch::Tensor stop_string_hits(const torch::Tensor& next, const std::vector<int64_t>& rows,
                               std::vector<std::vector<int64_t>>& generated, const Tokenizer& tokenizer,
                               const StopStrings& stop_strings) {
  const torch::Tensor ids = next.cpu().contiguous();
  std::vector<int64_t> hits(rows.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<int64_t>& text = generated[static_cast<size_t>(rows[i])];
    text.push_back(ids.data_ptr<int64_t>()[i]);
    hits[i] = stop_strings.find_in(tokenizer.decode(text)) != std::string::npos;
  }
  return torch::tensor(hits, torch::kLong).to(next.device()).to(torch::kBool);
}

// The prompts' final hidden states at their last tokens (B, C), their keys and values stored in
// the empty `cache`: packed (packed_prefill.h) when that saves rows and no sliding window would
// count the packed columns, else left-padded as given.
torch::Tensor prefill(CausalLMImpl& model, const torch::Tensor& ids, const torch::Tensor& mask, KvCache& cache) {
  c10::InferenceMode inference;  // as FixedDecodeStep::run: no autograd bookkeeping per op
  const int64_t window = model.config().sliding_window;
  if (!model.config().any_layer_slides() || ids.size(1) <= window) {
    if (const std::optional<PackedPrefill> packed = pack_prefill(ids, mask)) {
      cache.scatter_next(packed->token_index, packed->cache_rows, packed->cache_columns, packed->input_ids.size(0),
                         ids.size(1));
      const torch::Tensor hidden = model.model(packed->input_ids, packed->attention, packed->position_ids, &cache);
      return hidden.reshape({-1, hidden.size(-1)}).index_select(0, packed->last_index);
    }
  }
  return model.model(ids, mask, torch::Tensor(), &cache).select(1, -1);
}

// Prefills rows joining a running batch (ids, mask: (k, T) left-padded, trimmed here to their
// longest prompt; copies of one prompt share a prefill), adds them to `decoder` and returns their
// first logits (k, V) fp32.
torch::Tensor admit(CausalLMImpl& model, const torch::Tensor& ids, const torch::Tensor& mask,
                    FixedDecodeStep& decoder) {
  const int64_t width = mask.sum(1).max().item<int64_t>(), total = ids.size(1);
  const torch::Tensor trimmed_ids = ids.narrow(1, total - width, width);
  const torch::Tensor trimmed_mask = mask.narrow(1, total - width, width);
  const SharedPrompts shared = shared_prompts(trimmed_ids, trimmed_mask);
  const torch::Tensor unique = shared.unique_rows.to(ids.device()), copies = shared.prefill_row.to(ids.device());
  const torch::Tensor weight = model.model->embed_tokens->weight;
  KvCache prompts(model.config(), unique.numel(), width, weight.scalar_type(), weight.device());
  const torch::Tensor hidden =
      prefill(model, trimmed_ids.index_select(0, unique), trimmed_mask.index_select(0, unique), prompts);  // (U, C)
  decoder.admit_rows(prompts, copies, trimmed_mask);
  return model.logits(hidden).to(torch::kFloat).index_select(0, copies);
}

// LongRoPE (Phi-3): a forward takes the long factors once its longest sequence passes the original
// context. transformers then encodes the whole sequence again with them rather than mixing keys
// cached with the short factors and new ones with the long (Phi3ForCausalLM's
// prepare_inputs_for_generation), and so does generate(): once, at the step where the alive rows'
// longest sequence first passes it. The original context, or 0 for other models.
int64_t longrope_original_context(const ModelShape& config) {
  return config.rope_scaling.type == RopeScalingType::longrope ? config.rope_scaling.original_max_position_embeddings : 0;
}

}  // namespace

GenerateResult generate(CausalLMImpl& model, const at::Tensor& input_ids, const at::Tensor& attention_mask,
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
  const torch::Tensor mask = attention_mask.defined() ? attention_mask.to(device, at::kLong) : torch::ones_like(prompt_ids);
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
  const int64_t max_new = options.max_new_tokens;
  // A LongRoPE model that crosses its original context re-encodes every alive row at once, which
  // needs them aligned: no rows join later then.
  const int64_t long_context = longrope_original_context(model.config());
  const std::vector<int64_t> prompt_lengths = [&] {
    const torch::Tensor lengths = mask.sum(1).cpu().contiguous();
    return std::vector<int64_t>(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + batch);
  }();
  bool long_encoded = long_context == 0 || *std::max_element(prompt_lengths.begin(), prompt_lengths.end()) > long_context;
  const int64_t rows_at_once =
      options.max_rows > 0 && long_encoded ? std::min(options.max_rows, batch) : batch;
  // A row that joins later (continuous batching) writes its prompt's keys to end at the current
  // column and then needs up to max_new_tokens more columns; dropping the columns no row attends
  // any more keeps that within one more max_new_tokens (below).
  const int64_t capacity = prompt_length + max_new * (rows_at_once < batch ? 2 : 1);

  // The first rows_at_once rows. Rows with the same prompt (GRPO's and PPO's copies of one prompt)
  // are prefilled once and share its keys and values: the cache is then copied out to every row.
  const torch::Tensor first_ids = prompt_ids.narrow(0, 0, rows_at_once), first_mask = mask.narrow(0, 0, rows_at_once);
  const SharedPrompts shared = shared_prompts(first_ids, first_mask);
  const torch::Tensor unique = shared.unique_rows.to(device);
  const bool all_distinct = unique.numel() == rows_at_once;
  KvCache cache(model.config(), unique.numel(), capacity, weight.scalar_type(), device);
  torch::Tensor hidden = prefill(model, all_distinct ? first_ids : first_ids.index_select(0, unique),
                                 all_distinct ? first_mask : first_mask.index_select(0, unique), cache);  // (U, C)
  torch::Tensor logits = model.logits(hidden).to(torch::kFloat);  // (b, V), b = rows alive
  if (!all_distinct) {
    const torch::Tensor copies = shared.prefill_row.to(device);
    cache = cache.select_rows(copies);
    logits = logits.index_select(0, copies);
  }
  // Decoding at fixed shapes (fixed_decode_step.h): CUDA graphs replay it on a GPU.
  std::optional<FixedDecodeStep> decoder(std::in_place, model, cache, first_mask, options.cuda_graphs);

  // Rows still generating, as indices into the batch, and how many tokens each has; a row that
  // stops leaves the batch (with its cache rows), so the rest cost what they would alone, and a
  // waiting row takes its place. A row draws from its own generator (row_generators), so what it
  // samples does not depend on which rows are beside it.
  std::vector<int64_t> alive(static_cast<size_t>(rows_at_once)), produced(alive.size(), 0);
  for (int64_t r = 0; r < rows_at_once; ++r) alive[static_cast<size_t>(r)] = r;
  int64_t waiting = rows_at_once;  // the next row to admit
  std::vector<at::Generator> alive_generators;
  if (options.row_generators != nullptr) {
    alive_generators.assign(options.row_generators->begin(), options.row_generators->begin() + rows_at_once);
  }
  // Admitting costs a prefill forward: wait until a quarter of the rows are free (or the rest fit).
  const int64_t refill_at = std::max<int64_t>(1, rows_at_once / 4);
  const auto index_options = torch::TensorOptions().dtype(torch::kLong).device(device);
  torch::Tensor out_tokens = torch::full({batch, max_new}, pad, index_options);
  torch::Tensor out_mask = torch::zeros({batch, max_new}, index_options);
  torch::Tensor out_logprobs = torch::zeros({batch, max_new}, logits.options());
  int64_t longest = 0;
  while (true) {
    const torch::Tensor next = options.row_generators != nullptr
                                   ? choose_next_tokens(logits, options.sampling, alive_generators)
                                   : choose_next_tokens(logits, options.sampling, generator);  // (b)
    const torch::Tensor policy_logprobs = (logits / temperature).log_softmax(-1);  // (b, V)
    const torch::Tensor chosen = policy_logprobs.gather(1, next.unsqueeze(1)).squeeze(1);
    // Each row's token goes to its own next column; the stopping token itself counts.
    std::vector<int64_t> slots(alive.size()), spent(alive.size());  // spent: the row's budget is used up
    bool budget_spent = false;
    for (size_t i = 0; i < alive.size(); ++i) {
      slots[i] = alive[i] * max_new + produced[i]++;
      longest = std::max(longest, produced[i]);
      spent[i] = produced[i] == max_new;
      budget_spent |= spent[i] != 0;
    }
    const torch::Tensor slot = torch::tensor(slots, torch::kLong).to(device);
    out_tokens.view({-1}).index_copy_(0, slot, next);
    out_mask.view({-1}).index_fill_(0, slot, 1);
    out_logprobs.view({-1}).index_copy_(0, slot, chosen);
    torch::Tensor stopped = torch::isin(next, stop);
    if (!stop_strings.empty()) {
      stopped = stopped | stop_string_hits(next, alive, generated, *options.tokenizer, stop_strings);
    }
    if (budget_spent) stopped = stopped | torch::tensor(spent, torch::kLong).to(device).to(torch::kBool);
    torch::Tensor next_input = next;
    if (stopped.any().item<bool>()) {
      const torch::Tensor keep = (~stopped).nonzero().flatten();  // (b')
      if (keep.numel() == 0 && waiting == batch) break;
      next_input = next.index_select(0, keep);
      decoder->keep_rows(keep);
      const torch::Tensor on_host = keep.cpu();
      std::vector<int64_t> kept_rows, kept_produced;
      std::vector<at::Generator> kept_generators;
      for (int64_t i = 0; i < on_host.numel(); ++i) {
        const auto at = static_cast<size_t>(on_host.data_ptr<int64_t>()[i]);
        kept_rows.push_back(alive[at]);
        kept_produced.push_back(produced[at]);
        if (!alive_generators.empty()) kept_generators.push_back(alive_generators[at]);
      }
      alive = std::move(kept_rows);
      produced = std::move(kept_produced);
      alive_generators = std::move(kept_generators);
    }
    int64_t longest_row = 0;  // the alive rows' longest sequence, this step's token included
    for (size_t i = 0; i < alive.size(); ++i) {
      longest_row = std::max(longest_row, prompt_lengths[static_cast<size_t>(alive[i])] + produced[i]);
    }
    if (!long_encoded && longest_row > long_context) {
      // LongRoPE crosses (see longrope_original_context): the alive rows' prompts and tokens so far
      // are prefilled again into a new cache, with room for what is left to generate.
      long_encoded = true;
      const torch::Tensor rows = torch::tensor(alive, torch::kLong).to(device);
      const int64_t made = produced.front();  // every alive row has as many (no rows joined)
      const torch::Tensor ids = torch::cat({prompt_ids.index_select(0, rows), out_tokens.index_select(0, rows).narrow(1, 0, made)}, 1);
      const torch::Tensor seen = torch::cat({mask.index_select(0, rows), out_mask.index_select(0, rows).narrow(1, 0, made)}, 1);
      decoder.reset();  // it points into the old cache
      cache = KvCache(model.config(), rows.numel(), ids.size(1) + max_new - made, weight.scalar_type(), device);
      logits = model.logits(prefill(model, ids, seen, cache)).to(torch::kFloat);
      decoder.emplace(model, cache, seen, options.cuda_graphs);
      continue;
    }
    logits = alive.empty() ? torch::Tensor() : decoder->step(next_input);  // (b', V)
    const int64_t free = rows_at_once - static_cast<int64_t>(alive.size()), left = batch - waiting;
    if (left == 0 || free < std::min(left, refill_at)) continue;
    // Continuous batching: the waiting rows join (their prompts prefilled together) where rows left.
    const int64_t k = std::min(free, left);
    if (cache.length() + max_new - 1 > capacity) decoder->drop_unseen_columns(cache.length() - prompt_length);
    FERRY_CHECK(cache.length() + max_new - 1 <= capacity, "generate: no room in the KV cache for joining rows");
    const torch::Tensor joined = admit(model, prompt_ids.narrow(0, waiting, k), mask.narrow(0, waiting, k), *decoder);
    logits = logits.defined() ? torch::cat({logits, joined}) : joined;
    for (int64_t r = waiting; r < waiting + k; ++r) {
      alive.push_back(r);
      produced.push_back(0);
      if (options.row_generators != nullptr) alive_generators.push_back((*options.row_generators)[static_cast<size_t>(r)]);
    }
    waiting += k;
  }
  GenerateResult result;
  result.prompt_length = prompt_length;
  result.tokens = torch::cat({prompt_ids, out_tokens.narrow(1, 0, longest)}, 1);
  result.attention_mask = torch::cat({mask, out_mask.narrow(1, 0, longest)}, 1);
  result.logprobs = out_logprobs.narrow(1, 0, longest);
  return result;
}

}  // namespace ferry
