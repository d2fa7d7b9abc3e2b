// Generation throughput with the KV cache: greedy decoding of a batch of prompts for a fixed
// number of new tokens (no EOS), in tokens per second. scripts/bench-generate.sh runs it beside
// transformers' generate on the same weights and prompts and prints the ratio.
//
//   generate_bench --model DIR --prompts prompts.safetensors [--new-tokens 128] [--threads 2]
//                  [--repeats 3] [--tokens-out tokens.safetensors]
// prompts.safetensors holds input_ids and attention_mask (B, T), left-padded.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "src/core/error.h"
#include "src/generate/generate.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"

namespace {

struct BenchArgs {
  std::string model, prompts, tokens_out;
  int64_t new_tokens = 128, threads = 2, repeats = 3;
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
    ferry::GenerateOptions options;
    options.max_new_tokens = args.new_tokens;
    options.pad_token_id = 0;

    ferry::GenerateResult result = ferry::generate(*model, ids, mask, options);  // warm-up
    std::vector<double> seconds;
    for (int64_t r = 0; r < args.repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      result = ferry::generate(*model, ids, mask, options);
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    const int64_t generated = ids.size(0) * (result.tokens.size(1) - result.prompt_length);
    std::cout << "ferry: batch " << ids.size(0) << ", prompt " << ids.size(1) << ", new tokens "
              << result.tokens.size(1) - result.prompt_length << ", threads " << args.threads << ": median "
              << median << " s, " << generated / median << " tokens/s\n";
    std::cout << "ferry_tokens_per_s=" << generated / median << "\n";
    if (!args.tokens_out.empty()) ferry::io::save_safetensors(args.tokens_out, {{"tokens", result.tokens}});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "generate_bench: " << e.what() << "\n";
    return 1;
  }
}
