// Rows that share a prompt, packed so that the prompt goes through the model once: GRPO's
// num_generations completions of one prompt (and PPO's, RLOO's) hold the same prompt columns, and
// a causal model's prompt states do not depend on what follows them. Each group of rows with the
// same prompt becomes one packed sequence
//
//   [ prompt[0 .. L-2] | prompt[L-1] response_1 | prompt[L-1] response_2 | ... ]
//
// where each response block starts with a copy of the prompt's last token (the column whose logits
// predict the response's first token), attends the shared prompt and, causally, its own block only,
// and keeps the positions it had in its own row. Every response token therefore sees exactly the
// keys, values and positions it saw unpacked: the log-probs are the unpacked ones (up to the order
// of floating-point sums), while the prompt's forward and backward run once per group instead of
// once per row. The gradients of the shared prompt columns sum over the group's rows, as the
// unpacked rows' gradients sum in the weights.
//
// Layout of the input (experience.h): `sequences` (B, P + R) left-padded prompts then responses,
// `attention_mask` 1 at prompt tokens and counted response tokens.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>

namespace ferry::rl {

struct SharedPromptPack {
  torch::Tensor input_ids;     // (G, T) int64, one packed sequence per distinct prompt
  torch::Tensor attention;     // (G, 1, T, T) bool, true where a query may attend a key
  torch::Tensor position_ids;  // (G, T) int64, each token's position in its own row
  torch::Tensor targets;       // (G, T - first_column) int64, the token each column predicts; -1: none
  int64_t first_column = 0;    // the first column whose logits are taken
  torch::Tensor row_index;     // (B * R) int64: row b's response column t is element row_index[b * R + t]
                               // of the flattened (G, T - first_column) per-column results
  int64_t rows = 0, response_length = 0;

  // Per-column results (G, T - first_column) back to the rows' response layout (B, R); differentiable.
  torch::Tensor unpack(const torch::Tensor& per_column) const;
  // Tokens the packed forward runs (G * T), against the unpacked B * (P + R).
  int64_t packed_tokens() const { return input_ids.numel(); }
};

// The packed form of `sequences`, or nothing when no two rows share a prompt (packing would only
// add columns). Rows share a prompt when their prompt columns (tokens and mask) are identical.
// CPU tensors in, CPU tensors out.
std::optional<SharedPromptPack> pack_shared_prompts(const torch::Tensor& sequences, const torch::Tensor& attention_mask,
                                                    int64_t prompt_length);

// A minibatch's rows (a slice of a random order), sorted into rollout order when share_prompts, so
// that the rows of one prompt (adjacent in a rollout) fall into the same micro-batch: the minibatch
// holds the same rows, and its gradient sums over them in any order.
torch::Tensor minibatch_rows_in_order(const torch::Tensor& chosen, bool share_prompts);

}  // namespace ferry::rl
