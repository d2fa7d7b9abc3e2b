// Throughput of ggml dequantisation (src/io/ggml_dequantize.h) to float32 on 1..N threads: random
// blocks (every fp16 scale/min a finite half) of one weight shape per type, dequantised row by row
// (rows split over kernels::ThreadPool), and a copy of the output size as the memory-bound yardstick.
// Figures are GB/s of output floats (4 bytes per element), each the best of --reps runs (the
// machine may be shared). scripts/bench-dequantize.sh runs it next to numpy's gguf.quants.dequantize.
// Torch-free: the script compiles it with the dequantiser's own sources in seconds.
//
//   io_ggml_dequantize_bench [--types Q4_0,Q4_1,Q8_0,Q4_K,Q6_K] [--threads 1,2] [--shape 8192x4096]
//                            [--reps 5]
// Output: "RESULT <type> <threads> <elements> <seconds>" lines plus readable ones.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/thread_pool.h"
#include "src/io/ggml_dequantize.h"

#include "tests/bench/bench_timing.h"

namespace {

using ferry::bench::best_seconds;
using ferry::bench::split;

using namespace ferry;

// Byte offsets of the fp16 scale/min fields in one block of `type`.
std::vector<int> half_fields(io::GgmlType type) {
  using io::GgmlType;
  switch (type) {
    case GgmlType::q4_0: case GgmlType::q5_0: case GgmlType::q8_0: return {0};
    case GgmlType::q4_1: case GgmlType::q5_1: case GgmlType::q4_k: case GgmlType::q5_k: return {0, 2};
    case GgmlType::q2_k: return {80, 82};
    case GgmlType::q3_k: return {108};
    case GgmlType::q6_k: return {208};
    default: return {};
  }
}

const io::GgmlTypeTraits* type_by_name(const std::string& name) {
  for (uint32_t v = 0; v < 64; ++v) {
    const io::GgmlTypeTraits* traits = io::find_ggml_type(v);
    if (traits != nullptr && name == traits->name) return traits;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> types = {"Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K"};
  std::vector<int> threads = {1, 2};
  int64_t rows = 8192, cols = 4096;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--types") {
      types = split(v, ',');
    } else if (a == "--threads") {
      threads.clear();
      for (const auto& t : split(v, ',')) threads.push_back(std::stoi(t));
    } else if (a == "--shape") {
      const auto parts = split(v, 'x');
      rows = std::stoll(parts.at(0));
      cols = std::stoll(parts.at(1));
    } else if (a == "--reps") {
      reps = std::stoi(v);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::printf("Ferry dequantize_row, shape %lldx%lld (rows x elements per row)\n", static_cast<long long>(rows),
              static_cast<long long>(cols));
  const int64_t n = rows * cols;
  std::vector<float> out(static_cast<size_t>(n));
  std::vector<float> copy_source(static_cast<size_t>(n), 1.0f);
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);

  for (const int t : threads) {
    kernels::ThreadPool pool(t);
    const int64_t grain = std::max<int64_t>(1, 16384 / cols);  // rows per range
    const double copy = best_seconds(reps, [&] {
      pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
        std::memcpy(out.data() + begin * cols, copy_source.data() + begin * cols,
                    static_cast<size_t>((end - begin) * cols) * sizeof(float));
      });
    });
    std::printf("RESULT copy %d %lld %.9g\n", t, static_cast<long long>(n), copy);
    std::printf("  copy of the output size, %d thread(s): %.2f GB/s written\n", t, 4.0 * n / copy / 1e9);
    for (const auto& name : types) {
      const io::GgmlTypeTraits* traits = type_by_name(name);
      if (traits == nullptr || cols % traits->block_elements != 0) {
        std::fprintf(stderr, "bad type %s for rows of %lld\n", name.c_str(), static_cast<long long>(cols));
        return 2;
      }
      const int64_t row_bytes = cols / traits->block_elements * traits->block_bytes;
      std::vector<uint8_t> data(static_cast<size_t>(rows * row_bytes));
      for (auto& byte : data) byte = static_cast<uint8_t>(rng());
      for (int64_t b = 0; b < static_cast<int64_t>(data.size()) / traits->block_bytes; ++b) {
        for (const int field : half_fields(traits->type)) {
          const uint16_t h = kernels::float_to_fp16(scale(rng));
          std::memcpy(data.data() + b * traits->block_bytes + field, &h, 2);
        }
      }
      const double seconds = best_seconds(reps, [&] {
        pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            io::dequantize_row(traits->type, data.data() + r * row_bytes, cols, out.data() + r * cols);
          }
        });
      });
      std::printf("RESULT %s %d %lld %.9g\n", name.c_str(), t, static_cast<long long>(n), seconds);
      std::printf("  %s, %d thread(s): %.2f GB/s of output floats (%.3f G elements/s)\n", name.c_str(), t,
                  4.0 * n / seconds / 1e9, n / seconds / 1e9);
      std::fflush(stdout);
    }
  }
  return 0;
}
