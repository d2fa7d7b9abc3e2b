// NF4 CPU kernels (kernels/cpu/nf4.h) against the memory bus: dequantise (to bf16 and fp32) and
// quantise (from bf16) real weight shapes on 1..N threads, and a copy over a large buffer whose
// bandwidth (bytes read + written per second) bounds any dequantiser: a dequantise reads n/2 bytes
// of codes and 4n/blocksize of absmax and writes n * 2 (bf16) or n * 4 (fp32) bytes.
// scripts/bench-nf4.sh runs it next to bitsandbytes' dequantize_4bit and prints the ratios.
// Output: one "RESULT <kind> <shape> <threads> <seconds>" line per figure plus readable lines;
// every figure is the best of --reps runs (the machine may be shared).
//
//   kernels_nf4_bench [--threads 1,2] [--shapes 4096x4096,4096x11008] [--reps 5]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/thread_pool.h"

#include "tests/bench/bench_timing.h"

namespace {

using ferry::bench::best_seconds;
using ferry::bench::split;

using namespace ferry::kernels;

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  std::vector<std::string> shapes = {"4096x4096", "4096x11008"};
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads") {
      threads.clear();
      for (const auto& t : split(v, ',')) threads.push_back(std::stoi(t));
    } else if (a == "--shapes") {
      shapes = split(v, ',');
    } else if (a == "--reps") {
      reps = std::stoi(v);
    } else {
      std::fprintf(stderr, "usage: %s [--threads 1,2] [--shapes 4096x4096,...] [--reps 5]\n", argv[0]);
      return 2;
    }
  }
  std::printf("simd %s\n", simd_level().c_str());
  const int64_t blocksize = kNf4DefaultBlocksize;
  for (int t : threads) {
    ThreadPool pool(t);
    // Copy bandwidth: 256 MiB each way, split like the kernels split (whole ranges per thread).
    const int64_t copy_bytes = int64_t(256) << 20;
    std::vector<uint8_t> src(size_t(copy_bytes), 1), dst(size_t(copy_bytes), 0);
    const double copy_s = best_seconds(reps, [&] {
      pool.parallel_for(copy_bytes, int64_t(1) << 20, [&](int64_t b, int64_t e) {
        std::memcpy(dst.data() + b, src.data() + b, size_t(e - b));
      });
    });
    std::printf("RESULT copy - %d %.9g\n", t, copy_s);
    std::printf("  copy %d threads: %.1f GB/s (read + write)\n", t, 2.0 * copy_bytes / copy_s / 1e9);
    for (const auto& shape : shapes) {
      const auto dims = split(shape, 'x');
      const int64_t n = std::stoll(dims.at(0)) * std::stoll(dims.at(1));
      std::vector<uint16_t> weights(static_cast<size_t>(n));
      std::mt19937 rng(1);
      std::normal_distribution<float> normal(0.0f, 0.02f);
      for (auto& w : weights) w = float_to_bf16(normal(rng));
      std::vector<uint8_t> packed(size_t(nf4_packed_bytes(n)));
      std::vector<float> absmax(size_t(nf4_blocks(n, blocksize)));
      const double quant_s = best_seconds(std::max(1, reps / 2), [&] {
        nf4_quantize(weights.data(), Nf4ValueType::bf16, n, blocksize, packed.data(), absmax.data(), &pool);
      });
      std::printf("RESULT quantize_bf16 %s %d %.9g\n", shape.c_str(), t, quant_s);
      std::printf("  quantise bf16 %s, %d threads: %.3f G elements/s\n", shape.c_str(), t, n / quant_s / 1e9);
      for (Nf4ValueType out_type : {Nf4ValueType::bf16, Nf4ValueType::f32}) {
        std::vector<uint8_t> out(size_t(n * nf4_value_bytes(out_type)));
        const double s = best_seconds(reps, [&] {
          nf4_dequantize(packed.data(), absmax.data(), n, blocksize, out.data(), out_type, &pool);
        });
        const char* name = out_type == Nf4ValueType::bf16 ? "dequantize_bf16" : "dequantize_f32";
        const double bytes = double(packed.size()) + 4.0 * double(absmax.size()) + double(out.size());
        std::printf("RESULT %s %s %d %.9g\n", name, shape.c_str(), t, s);
        std::printf("  %s %s, %d threads: %.3f G elements/s, %.1f GB/s, %.0f%% of the copy bound\n", name,
                    shape.c_str(), t, n / s / 1e9, bytes / s / 1e9, 100.0 * (bytes / s) / (2.0 * copy_bytes / copy_s));
      }
    }
  }
  return 0;
}
