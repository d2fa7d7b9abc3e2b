// Memory and time of opening an RL prompt file (train/rl/prompt_dataset.h): a PromptFile checks and
// renders every line but keeps 16 bytes a prompt; the reference in the same run is holding every
// rendered prompt (std::vector<RolloutPrompt>, what the loader did before and what a naive one
// does), measured on the first --hold prompts and scaled to the file.
//
//   prompt_file_bench --prompts prompts.jsonl [--hold 1000000]
//
// Resident memory is read from /proc/self/statm before and after each part. Prints
// "RESULT <what> <value>" lines.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "train/rl/prompt_dataset.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string prompts_path;
  int64_t hold = 1000000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--prompts") {
      prompts_path = argv[i + 1];
    } else if (a == "--hold") {
      hold = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (prompts_path.empty()) {
    std::fprintf(stderr, "usage: prompt_file_bench --prompts prompts.jsonl [--hold 1000000]\n");
    return 2;
  }
  try {
    const ferry::Tokenizer tokenizer(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model");
    const ferry::ChatTemplate chat = ferry::load_chat_template("demo");
    std::ostringstream log;

    const int64_t before = resident_bytes();
    auto start = Clock::now();
    const ferry::rl::PromptFile file(prompts_path, tokenizer, chat, {}, log);
    const double open_seconds = seconds_since(start);
    const int64_t indexed = resident_bytes() - before;
    const auto prompts = static_cast<int64_t>(file.size());
    std::printf("RESULT prompts %lld\n", static_cast<long long>(prompts));
    std::printf("RESULT open_seconds %.2f\n", open_seconds);
    std::printf("RESULT open_lines_per_s %.0f\n", static_cast<double>(prompts) / open_seconds);
    std::printf("RESULT indexed_bytes %lld\n", static_cast<long long>(indexed));
    std::printf("RESULT indexed_bytes_per_prompt %.1f\n", static_cast<double>(indexed) / static_cast<double>(prompts));

    // The reference: every rendered prompt held (the first `hold` of them), scaled to the file.
    hold = std::min(hold, prompts);
    std::vector<int64_t> indices(static_cast<size_t>(hold));
    std::iota(indices.begin(), indices.end(), int64_t{0});
    const int64_t before_hold = resident_bytes();
    start = Clock::now();
    std::vector<ferry::rl::RolloutPrompt> held;
    held.reserve(static_cast<size_t>(hold));
    for (size_t begin = 0; begin < indices.size(); begin += 4096) {  // load() a rollout-sized slice at a time
      const std::vector<int64_t> slice(indices.begin() + static_cast<std::ptrdiff_t>(begin),
                                       indices.begin() + static_cast<std::ptrdiff_t>(std::min(indices.size(), begin + 4096)));
      for (auto& [index, prompt] : file.load(slice)) held.push_back(std::move(prompt));
    }
    const double load_seconds = seconds_since(start);
    const double held_per_prompt = static_cast<double>(resident_bytes() - before_hold) / static_cast<double>(hold);
    std::printf("RESULT held_prompts %lld\n", static_cast<long long>(hold));
    std::printf("RESULT held_bytes_per_prompt %.1f\n", held_per_prompt);
    std::printf("RESULT held_bytes_for_file %.0f\n", held_per_prompt * static_cast<double>(prompts));
    std::printf("RESULT reload_prompts_per_s %.0f\n", static_cast<double>(hold) / load_seconds);
    std::printf("RESULT ratio_held_over_indexed %.1f\n",
                held_per_prompt * static_cast<double>(prompts) / static_cast<double>(std::max<int64_t>(indexed, 1)));
  } catch (const ferry::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
