// The prefill + decode loop.
#include "src/generate/generate.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "src/core/error.h"
#include "src/generate/stop_strings.h"
#include "src/model/kv_cache.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

// Appends this step's tokens (B) to `generated` for the rows still generating (`active`, B 1/0)
// and returns (B) bool: true for rows whose decoded continuation now contains a stop string.
// Checked every step, so the hit is at the token that completes the string.
torch::Tensor stop_string_hits(const torch::Tensor& next, const torch::Tensor& active,
                               std::vector<std::vector<int64_t>>& generated, const Tokenizer& tokenizer,
                               const StopStrings& stop_strings) {
  const torch::Tensor ids = next.cpu().contiguous(), on = active.cpu().contiguous();
  std::vector<uint8_t> hits(generated.size(), 0);
  for (size_t row = 0; row < generated.size(); ++row) {
    if (on.data_ptr<int64_t>()[row] == 0) continue;
    generated[row].push_back(ids.data_ptr<int64_t>()[row]);
    hits[row] = stop_strings.find_in(tokenizer.decode(generated[row])) != std::string::npos;
  }
  return torch::tensor(std::vector<int64_t>(hits.begin(), hits.end()), torch::kLong).to(next.device()).to(torch::kBool);
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
  const double temperature = options.sampling.greedy ? 1.0 : options.sampling.temperature;

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
  KvCache cache(model.config(), batch, prompt_length + options.max_new_tokens, weight.scalar_type(), device);
  torch::Tensor hidden = model.model(prompt_ids, mask, torch::Tensor(), &cache).select(1, -1);  // (B, C)
  torch::Tensor running = torch::ones({batch}, torch::TensorOptions().dtype(torch::kBool).device(device));
  std::vector<torch::Tensor> new_tokens, new_mask, logprobs;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const torch::Tensor logits = model.logits(hidden).to(torch::kFloat);  // (B, V)
    torch::Tensor next = options.row_generators != nullptr
                             ? choose_next_tokens(logits, options.sampling, *options.row_generators)
                             : choose_next_tokens(logits, options.sampling, generator);  // (B)
    const torch::Tensor policy_logprobs = (logits / temperature).log_softmax(-1);  // (B, V)
    torch::Tensor chosen = policy_logprobs.gather(1, next.unsqueeze(1)).squeeze(1);
    next = torch::where(running, next, torch::full_like(next, pad));
    chosen = torch::where(running, chosen, torch::zeros_like(chosen));
    const torch::Tensor column = running.to(torch::kLong);  // the stopping token itself still counts
    new_tokens.push_back(next);
    new_mask.push_back(column);
    logprobs.push_back(chosen);
    running = running & ~torch::isin(next, stop);
    if (!stop_strings.empty()) running = running & ~stop_string_hits(next, column, generated, *options.tokenizer, stop_strings);
    if (step + 1 == options.max_new_tokens || !running.any().item<bool>()) break;
    mask = torch::cat({mask, column.unsqueeze(1)}, 1);  // (B, L + 1)
    hidden = model.model(next.unsqueeze(1), mask, torch::Tensor(), &cache).squeeze(1);  // (B, C)
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
