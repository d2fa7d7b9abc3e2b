// Generation throughput with the KV cache: decoding a batch of prompts, in generated tokens per
// second (tokens up to and including each row's stop; padding after it is not counted).
// scripts/bench-generate.sh (greedy, a fixed number of new tokens, no EOS) and
// scripts/bench-rollout.sh (rows that stop early at --eos ids, prompts repeated as RL rollouts
// repeat them, greedy or sampled with one generator per row as rollouts sample) run it beside
// transformers' generate on the same weights and prompts and print the ratio.
//
//   generate_bench --model DIR --prompts prompts.safetensors [--new-tokens 128] [--threads 2]
//                  [--repeats 3] [--eos ID,ID,...] [--sample SEED] [--tokens-out tokens.safetensors]
//                  [--device cpu|cuda] [--dtype fp32|bf16] [--cuda-graphs 1|0]
//                  [--max-rows N | --batches-of N]
//   generate_bench --config config.json --random-prompts B ...   (no Python needed: a GPU machine)
// prompts.safetensors holds input_ids and attention_mask (B, T), left-padded. --config builds a
// random model of that config.json's shape instead, and --random-prompts B makes B/4 prompts of
// 16-63 random tokens, each 4 times (as GRPO repeats them), left-padded. --max-rows N decodes N
// rows at a time, the others joining as rows stop (continuous batching); --batches-of N instead
// runs the rows in consecutive batches of N, each until its longest row ends (static batches).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/generate/generate.h"
#include "src/generate/sampling.h"
#include "src/io/safetensors.h"
#include "src/io/hf_config.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"

namespace {

struct BenchArgs {
  std::string model, prompts, tokens_out, config, device = "cpu", dtype = "fp32";
  int64_t new_tokens = 128, threads = 2, repeats = 3, random_prompts = 0, max_rows = 0, batches_of = 0;
  bool cuda_graphs = true;
  std::vector<int64_t> eos;
  int64_t sample_seed = -1;  // -1: greedy
};

BenchArgs parse(int argc, char** argv) {
  BenchArgs args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw ferry::UserError("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--model") args.model = value;
    else if (flag == "--prompts") args.prompts = value;
    else if (flag == "--tokens-out") args.tokens_out = value;
    else if (flag == "--new-tokens") args.new_tokens = std::stoll(value);
    else if (flag == "--threads") args.threads = std::stoll(value);
    else if (flag == "--repeats") args.repeats = std::stoll(value);
    else if (flag == "--sample") args.sample_seed = std::stoll(value);
    else if (flag == "--config") args.config = value;
    else if (flag == "--random-prompts") args.random_prompts = std::stoll(value);
    else if (flag == "--device") args.device = value;
    else if (flag == "--dtype") args.dtype = value;
    else if (flag == "--cuda-graphs") args.cuda_graphs = value != "0";
    else if (flag == "--max-rows") args.max_rows = std::stoll(value);
    else if (flag == "--batches-of") args.batches_of = std::stoll(value);
    else if (flag == "--eos") {
      for (size_t at = 0; at < value.size();) {
        const size_t comma = std::min(value.find(',', at), value.size());
        args.eos.push_back(std::stoll(value.substr(at, comma - at)));
        at = comma + 1;
      }
    }
    else throw ferry::UserError("unknown flag " + flag);
  }
  if ((args.model.empty() && args.config.empty()) || (args.prompts.empty() && args.random_prompts <= 0)) {
    throw ferry::UserError("--model (or --config) and --prompts (or --random-prompts) are required");
  }
  return args;
}

// B/4 prompts of 16-63 random tokens, each 4 times, left-padded: (input_ids, attention_mask).
std::pair<torch::Tensor, torch::Tensor> random_prompts(int64_t rows, int64_t vocab) {
  torch::manual_seed(static_cast<uint64_t>(rows));
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t p = 0; p < rows / 4; ++p) {
    const int64_t length = torch::randint(16, 64, {1}).item<int64_t>();
    const torch::Tensor ids = torch::randint(3, vocab, {length}, torch::kLong);
    for (int copy = 0; copy < 4; ++copy) prompts.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length);
  }
  int64_t width = 0;
  for (const auto& p : prompts) width = std::max<int64_t>(width, static_cast<int64_t>(p.size()));
  torch::Tensor ids = torch::zeros({static_cast<int64_t>(prompts.size()), width}, torch::kLong);
  torch::Tensor mask = torch::zeros_like(ids);
  for (size_t r = 0; r < prompts.size(); ++r) {
    const int64_t n = static_cast<int64_t>(prompts[r].size());
    ids[static_cast<int64_t>(r)].narrow(0, width - n, n).copy_(torch::tensor(prompts[r], torch::kLong));
    mask[static_cast<int64_t>(r)].narrow(0, width - n, n).fill_(1);
  }
  return {ids, mask};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const BenchArgs args = parse(argc, argv);
    torch::set_num_threads(static_cast<int>(args.threads));
    ferry::CausalLM model{nullptr};
    if (!args.config.empty()) {
      const ferry::ModelShape config = ferry::io::read_hf_config(args.config);
      model = ferry::CausalLM(config);
      ferry::init_model_weights(*model, config, 0.02, 0);
    } else {
      model = ferry::causal_lm_from_pretrained(args.model);
    }
    torch::Tensor ids, mask;
    if (args.random_prompts > 0) {
      std::tie(ids, mask) = random_prompts(args.random_prompts, model->config().vocab_size);
    } else {
      const ferry::io::TensorMap prompts = ferry::io::load_safetensors(args.prompts);
      ids = prompts.at("input_ids");
      mask = prompts.at("attention_mask");
    }
    const torch::Device device(args.device);
    model->to(device, args.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat);
    ids = ids.to(device);
    mask = mask.to(device);
    model->eval();
    ferry::GenerateOptions options;
    options.max_new_tokens = args.new_tokens;
    options.pad_token_id = 0;
    options.stop_token_ids = args.eos;
    options.sampling.greedy = args.sample_seed < 0;
    options.cuda_graphs = args.cuda_graphs;
    options.max_rows = args.max_rows;
    const int64_t rows = ids.size(0), batch = args.batches_of > 0 ? std::min(args.batches_of, rows) : rows;
    std::vector<at::Generator> generators;
    auto run = [&] {
      if (args.sample_seed >= 0) {  // fresh per-row generators: every repeat samples the same rows
        generators.clear();
        for (int64_t row = 0; row < rows; ++row) {
          generators.push_back(ferry::make_sampling_generator(static_cast<uint64_t>(args.sample_seed + row)));
        }
      }
      // Static batches: each its own generate() call; the results are stitched (padded to the
      // longest batch's new tokens) so that they compare row by row.
      std::vector<ferry::GenerateResult> parts;
      for (int64_t begin = 0; begin < rows; begin += batch) {
        const int64_t n = std::min(batch, rows - begin);
        std::vector<at::Generator> part;
        for (int64_t row = begin; row < begin + n && !generators.empty(); ++row) part.push_back(generators[row]);
        options.row_generators = part.empty() ? nullptr : &part;
        parts.push_back(ferry::generate(*model, ids.narrow(0, begin, n), mask.narrow(0, begin, n), options));
      }
      if (device.is_cuda()) torch::cuda::synchronize();
      if (parts.size() == 1) return parts.front();
      int64_t width = 0;
      for (const auto& part : parts) width = std::max(width, part.tokens.size(1));
      ferry::GenerateResult out = parts.front();
      std::vector<torch::Tensor> tokens, masks;
      for (const auto& part : parts) {
        const int64_t missing = width - part.tokens.size(1);
        tokens.push_back(torch::constant_pad_nd(part.tokens, {0, missing}, 0));
        masks.push_back(torch::constant_pad_nd(part.attention_mask, {0, missing}, 0));
      }
      out.tokens = torch::cat(tokens);
      out.attention_mask = torch::cat(masks);
      return out;
    };

    ferry::GenerateResult result = run();  // warm-up
    std::vector<double> seconds;
    for (int64_t r = 0; r < args.repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      result = run();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    const int64_t generated = result.attention_mask.narrow(1, result.prompt_length, result.tokens.size(1) - result.prompt_length)
                                  .sum()
                                  .item<int64_t>();
    const std::string scheme = args.max_rows > 0    ? " (" + std::to_string(args.max_rows) + " at a time, rows joining)"
                               : args.batches_of > 0 ? " (in batches of " + std::to_string(batch) + ")"
                                                     : "";
    std::cout << "ferry" << (device.is_cuda() ? (args.cuda_graphs ? " cuda graphs" : " cuda eager") : "") << ": batch " << ids.size(0) << scheme << ", prompt " << ids.size(1) << ", new tokens at most "
              << result.tokens.size(1) - result.prompt_length << " (" << generated << " generated), threads "
              << args.threads << ": median " << median << " s, " << generated / median << " tokens/s\n";
    std::cout << "ferry_tokens_per_s=" << generated / median << "\n";
    if (!args.tokens_out.empty()) ferry::io::save_safetensors(args.tokens_out, {{"tokens", result.tokens.cpu()}});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "generate_bench: " << e.what() << "\n";
    return 1;
  }
}
