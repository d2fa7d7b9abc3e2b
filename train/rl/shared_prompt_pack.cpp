// Packing rows that share a prompt (see shared_prompt_pack.h).
#include "train/rl/shared_prompt_pack.h"

#include <ATen/ATen.h>

#include <vector>

#include "core/error.h"
#include "src/generate/prompt_batch.h"
#include "src/model/attention_mask.h"

namespace ferry::rl {

torch::Tensor SharedPromptPack::unpack(const torch::Tensor& per_column) const {
  return per_column.reshape({-1}).index_select(0, row_index.to(per_column.device())).view({rows, response_length});
}

std::optional<SharedPromptPack> pack_shared_prompts(const torch::Tensor& sequences, const torch::Tensor& attention_mask,
                                                    int64_t prompt_length) {
  FERRY_CHECK(sequences.dim() == 2 && attention_mask.sizes() == sequences.sizes(),
              "pack_shared_prompts: sequences and attention_mask must be the same (B, P + R)");
  const int64_t rows = sequences.size(0), width = sequences.size(1);
  const int64_t p = prompt_length, r = width - prompt_length;
  FERRY_CHECK(p >= 1 && r >= 1, "pack_shared_prompts: needs prompt and response columns");
  const torch::Tensor seq_cpu = sequences.to(torch::kCPU, torch::kLong).contiguous();
  const torch::Tensor mask_cpu = attention_mask.to(torch::kCPU, torch::kLong).contiguous();
  const auto seq = seq_cpu.accessor<int64_t, 2>();
  const auto mask = mask_cpu.accessor<int64_t, 2>();

  // Groups of rows with identical prompt columns, in order of first appearance.
  const SharedPrompts shared = shared_prompts(seq_cpu.narrow(1, 0, p), mask_cpu.narrow(1, 0, p));
  const int64_t groups = shared.unique_rows.numel();
  if (groups == rows) return std::nullopt;  // nothing shared
  const auto first_row = shared.unique_rows.accessor<int64_t, 1>();
  const auto group_of = shared.prefill_row.accessor<int64_t, 1>();
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(groups));  // group -> its rows
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(groups));  // group -> its prompt tokens
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < p; ++c) {
      if (mask[first_row[g]][c] != 0) prompts[static_cast<size_t>(g)].push_back(seq[first_row[g]][c]);
    }
    if (prompts[static_cast<size_t>(g)].empty()) return std::nullopt;  // nothing predicts the first response token
  }
  for (int64_t b = 0; b < rows; ++b) members[static_cast<size_t>(group_of[b])].push_back(b);

  int64_t shared_width = 0, blocks = 0;  // W: the longest prompt but its last token; K: the largest group
  for (int64_t g = 0; g < groups; ++g) {
    shared_width = std::max<int64_t>(shared_width, static_cast<int64_t>(prompts[g].size()) - 1);
    blocks = std::max<int64_t>(blocks, static_cast<int64_t>(members[g].size()));
  }
  const int64_t block = r + 1, columns = blocks * block, length = shared_width + columns;
  torch::Tensor ids = torch::zeros({groups, length}, torch::kLong);
  torch::Tensor positions = torch::zeros({groups, length}, torch::kLong);
  torch::Tensor is_token = torch::zeros({groups, length}, torch::kBool);
  torch::Tensor segment = torch::full({groups, length}, -1, torch::kLong);  // -1 shared prompt, k block k
  torch::Tensor targets = torch::full({groups, columns}, -1, torch::kLong);
  torch::Tensor row_index = torch::empty({rows * r}, torch::kLong);
  auto id = ids.accessor<int64_t, 2>();
  auto pos = positions.accessor<int64_t, 2>();
  auto tok = is_token.accessor<bool, 2>();
  auto seg = segment.accessor<int64_t, 2>();
  auto tgt = targets.accessor<int64_t, 2>();
  auto where = row_index.accessor<int64_t, 1>();
  for (int64_t g = 0; g < groups; ++g) {
    const std::vector<int64_t>& prompt = prompts[g];
    const int64_t length_g = static_cast<int64_t>(prompt.size());
    const int64_t start = shared_width - (length_g - 1);  // the shared prompt ends at column W - 1
    for (int64_t i = 0; i + 1 < length_g; ++i) {
      id[g][start + i] = prompt[i];
      pos[g][start + i] = i;
      tok[g][start + i] = true;
    }
    for (int64_t k = 0; k < blocks; ++k) {
      const int64_t s = shared_width + k * block;
      for (int64_t i = 0; i < block; ++i) seg[g][s + i] = k;
      if (k >= static_cast<int64_t>(members[g].size())) continue;  // an empty block: padding
      const int64_t b = members[g][k];
      id[g][s] = prompt[length_g - 1];  // the prompt's last token, at its own position
      pos[g][s] = length_g - 1;
      tok[g][s] = true;
      for (int64_t t = 0; t < r; ++t) {
        const bool counted = mask[b][p + t] != 0;
        id[g][s + 1 + t] = seq[b][p + t];
        pos[g][s + 1 + t] = counted ? length_g + t : 0;  // padding at position 0, as unpacked
        tok[g][s + 1 + t] = counted;
        tgt[g][k * block + t] = seq[b][p + t];
        where[b * r + t] = g * columns + k * block + t;
      }
    }
  }
  SharedPromptPack pack;
  pack.attention = packed_attention_mask(segment, is_token, /*shared=*/-1);  // a block sees the prompt and itself
  pack.input_ids = ids;
  pack.position_ids = positions;
  pack.targets = targets;
  pack.first_column = shared_width;
  pack.row_index = row_index;
  pack.rows = rows;
  pack.response_length = r;
  return pack;
}

torch::Tensor minibatch_rows_in_order(const torch::Tensor& chosen, bool share_prompts) {
  return share_prompts ? std::get<0>(chosen.sort()) : chosen;
}

}  // namespace ferry::rl
