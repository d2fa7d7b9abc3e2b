// Generation throughput with the KV cache: decoding a batch of prompts, in generated tokens per
// second (tokens up to and including each row's stop; padding after it is not counted).
// scripts/bench-generate.sh (greedy, a fixed number of new tokens, no EOS) and
// scripts/bench-rollout.sh (rows that stop early at --eos ids, prompts repeated as RL rollouts
// repeat them, greedy or sampled with one generator per row as rollouts sample) run it beside
// transformers' generate on the same weights and prompts and print the ratio.
//
//   generate_bench --model DIR --prompts prompts.safetensors [--new-tokens 128] [--threads 2]
//                  [--repeats 3] [--eos ID,ID,...] [--sample SEED] [--tokens-out tokens.safetensors]
// prompts.safetensors holds input_ids and attention_mask (B, T), left-padded.
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
#include "src/model/pretrained.h"

namespace {

struct BenchArgs {
  std::string model, prompts, tokens_out;
  int64_t new_tokens = 128, threads = 2, repeats = 3;
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
    else if (flag == "--eos") {
      for (size_t at = 0; at < value.size();) {
        const size_t comma = std::min(value.find(',', at), value.size());
        args.eos.push_back(std::stoll(value.substr(at, comma - at)));
        at = comma + 1;
      }
    }
    else throw ferry::UserError("unknown flag " + flag);
  }
  if (args.model.empty() || args.prompts.empty()) throw ferry::UserError("--model and --prompts are required");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const BenchArgs args = parse(argc, argv);
    torch::set_num_threads(static_cast<int>(args.threads));
    const ferry::io::TensorMap prompts = ferry::io::load_safetensors(args.prompts);
    ferry::LlamaForCausalLM model = ferry::causal_lm_from_pretrained(args.model);
    const torch::Tensor& ids = prompts.at("input_ids");
    const torch::Tensor& mask = prompts.at("attention_mask");
    model->eval();
    ferry::GenerateOptions options;
    options.max_new_tokens = args.new_tokens;
    options.pad_token_id = 0;
    options.stop_token_ids = args.eos;
    options.sampling.greedy = args.sample_seed < 0;
    std::vector<at::Generator> generators;
    auto run = [&] {
      if (args.sample_seed >= 0) {  // fresh per-row generators: every repeat samples the same rows
        generators.clear();
        for (int64_t row = 0; row < ids.size(0); ++row) {
          generators.push_back(ferry::make_sampling_generator(static_cast<uint64_t>(args.sample_seed + row)));
        }
        options.row_generators = &generators;
      }
      return ferry::generate(*model, ids, mask, options);
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
    std::cout << "ferry: batch " << ids.size(0) << ", prompt " << ids.size(1) << ", new tokens at most "
              << result.tokens.size(1) - result.prompt_length << " (" << generated << " generated), threads "
              << args.threads << ": median " << median << " s, " << generated / median << " tokens/s\n";
    std::cout << "ferry_tokens_per_s=" << generated / median << "\n";
    if (!args.tokens_out.empty()) ferry::io::save_safetensors(args.tokens_out, {{"tokens", result.tokens}});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "generate_bench: " << e.what() << "\n";
    return 1;
  }
}
