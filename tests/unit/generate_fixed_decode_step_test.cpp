// The fixed-shape decode step (src/generate/fixed_decode_step.h) against the model's full forward
// without a cache: at every step, each alive row's logits equal those of the whole left-padded
// sequence so far (prompt and the tokens fed) — decoded over exactly the alive rows and written
// columns (the CPU path), and over the shapes a CUDA graph runs (the bucket's rows, rows left from
// finished ones among them, and every cache column), with rows leaving mid-way, rows joining
// mid-way (continuous batching: their prompts' keys end at the current column) and the leading
// columns no row attends dropped, with and without a sliding window shorter than the sequences.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <vector>

#include "src/generate/fixed_decode_step.h"
#include "src/generate/prompt_batch.h"
#include "src/model/kv_cache.h"
#include "src/model/model_state.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry {
namespace {

void decode_against_full_forward(int64_t sliding_window, bool bucket_shapes) {
  ModelShape config = test_support::tiny_llama_config(97);
  config.sliding_window = sliding_window;
  CausalLM model(config);
  init_model_weights(*model, config, 0.3, 6);
  model->eval();
  torch::NoGradGuard no_grad;
  const PromptBatch batch = left_pad({{5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14}, {15}, {16, 17, 18, 19}}, 0);
  const int64_t rows = 5, prompt = batch.input_ids.size(1), steps = 9;
  KvCache cache(config, rows, prompt + steps, at::kFloat, at::kCPU);
  model->model(batch.input_ids, batch.attention_mask, torch::Tensor(), &cache);
  FixedDecodeStep decoder(*model, cache, batch.attention_mask, /*use_graphs=*/false, bucket_shapes);
  torch::Tensor sequences = batch.input_ids, mask = batch.attention_mask;  // the alive rows so far
  for (int64_t step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (step == 3) {  // rows 1 and 3 stop: the others move up within the same buffers
      const torch::Tensor keep = torch::tensor({0, 2, 4}, torch::kLong);
      decoder.keep_rows(keep);
      sequences = sequences.index_select(0, keep);
      mask = mask.index_select(0, keep);
    }
    if (step == 4) {  // two rows join, prefilled on their own; their keys end at the current column
      const PromptBatch joining = left_pad({{21, 22, 23}, {24, 25}}, 0);
      KvCache prefilled(config, 2, joining.input_ids.size(1), at::kFloat, at::kCPU);
      model->model(joining.input_ids, joining.attention_mask, torch::Tensor(), &prefilled);
      decoder.admit_rows(prefilled, torch::tensor({0, 1}, torch::kLong), joining.attention_mask);
      const int64_t gap = sequences.size(1) - joining.input_ids.size(1);
      sequences = torch::cat({sequences, torch::constant_pad_nd(joining.input_ids, {gap, 0})});
      mask = torch::cat({mask, torch::constant_pad_nd(joining.attention_mask, {gap, 0})});
    }
    if (step == 6) {  // the longest prompt's row stops: the columns before the next one's are dropped
      const torch::Tensor keep = torch::tensor({1, 2, 3, 4}, torch::kLong);
      decoder.keep_rows(keep);
      sequences = sequences.index_select(0, keep);
      mask = mask.index_select(0, keep);
      // Row 4's prompt starts at column 1; a window of 4 hides every column before 7 (the last
      // step wrote column 10).
      const int64_t dropped = sliding_window > 0 ? 7 : 1;
      EXPECT_EQ(decoder.drop_unseen_columns(100), dropped);
      EXPECT_EQ(cache.length(), prompt + step - dropped);
    }
    const int64_t alive = sequences.size(0);
    const torch::Tensor tokens = (torch::arange(alive, torch::kLong) * 7 + step * 3 + 20) % 97;
    sequences = torch::cat({sequences, tokens.unsqueeze(1)}, 1);
    mask = torch::cat({mask, torch::ones({alive, 1}, torch::kLong)}, 1);
    const torch::Tensor got = decoder.step(tokens);                                       // (alive, V)
    const torch::Tensor want = model->forward(sequences, mask).select(1, -1).to(torch::kFloat);  // no cache
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_LE((got - want).abs().max().item<double>(), 1e-4);
  }
}

TEST(FixedDecodeStep, ExactShapesEqualTheFullForward) { decode_against_full_forward(0, false); }
TEST(FixedDecodeStep, GraphShapesEqualTheFullForward) { decode_against_full_forward(0, true); }
TEST(FixedDecodeStep, SlidingWindowEqualsTheFullForward) {
  decode_against_full_forward(4, false);
  decode_against_full_forward(4, true);
}

}  // namespace
}  // namespace ferry
