// Ferry's ggml block quantiser (kernels/cpu/ggml_quantize.h) on the float32 tensors of a GGUF file:
// every range given (byte offset and value count of an F32 tensor in the file, whose rows are whole
// blocks of the type) quantised with ggml_quantize on pools of 1..N threads, and with the scalar
// definition and each SIMD path this CPU has (AVX2, AVX-512) on one thread. scripts/bench-quantize.sh runs it next to llama.cpp's quantiser on the
// same file and prints the ratios. Output: "RESULT <path> <threads> <seconds> <values>" lines plus
// readable ones; each figure is the best of --reps runs (the machine may be shared).
//
//   kernels_ggml_quantize_bench --file F32.gguf --ranges OFFSET:COUNT,... [--type q4_k]
//                               [--threads 1,2] [--reps 3]
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ggml_quantize.h"
#include "kernels/cpu/thread_pool.h"

#include "tests/bench/bench_timing.h"

namespace {

using ferry::bench::best_seconds;
using ferry::bench::split;

using namespace ferry::kernels;

struct Range {
  int64_t offset;
  int64_t count;
};

}  // namespace

int main(int argc, char** argv) {
  std::string file, type_name = "q4_k";
  std::vector<Range> ranges;
  std::vector<int> threads = {1, 2};
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--file") {
      file = v;
    } else if (a == "--ranges") {
      for (const auto& r : split(v, ',')) {
        const auto parts = split(r, ':');
        ranges.push_back({std::stoll(parts.at(0)), std::stoll(parts.at(1))});
      }
    } else if (a == "--type") {
      type_name = v;
    } else if (a == "--threads") {
      threads.clear();
      for (const auto& t : split(v, ',')) threads.push_back(std::stoi(t));
    } else if (a == "--reps") {
      reps = std::stoi(v);
    } else {
      file.clear();
      break;
    }
  }
  const std::map<std::string, GgmlQuantType> types = {{"q4_k", GgmlQuantType::q4_k}, {"q5_k", GgmlQuantType::q5_k},
                                                       {"q6_k", GgmlQuantType::q6_k}, {"q4_0", GgmlQuantType::q4_0},
                                                       {"q5_0", GgmlQuantType::q5_0}, {"q8_0", GgmlQuantType::q8_0}};
  if (file.empty() || ranges.empty() || types.count(type_name) == 0) {
    std::fprintf(stderr, "usage: %s --file F32.gguf --ranges OFFSET:COUNT,... [--type q4_k] [--threads 1,2] [--reps 3]\n",
                 argv[0]);
    return 2;
  }
  const GgmlQuantType type = types.at(type_name);
  const GgmlQuantBlock block = ggml_quant_block(type);
  const int fd = open(file.c_str(), O_RDONLY);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    std::fprintf(stderr, "cannot open %s\n", file.c_str());
    return 1;
  }
  void* mapped = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped == MAP_FAILED) {
    std::fprintf(stderr, "cannot map %s\n", file.c_str());
    return 1;
  }
  const auto* base = static_cast<const uint8_t*>(mapped);
  int64_t values = 0, out_bytes = 0;
  for (const Range& r : ranges) {
    if (r.offset < 0 || r.offset + r.count * 4 > st.st_size || r.count % block.elements != 0) {
      std::fprintf(stderr, "range %lld:%lld is outside the file or not whole blocks\n", (long long)r.offset,
                   (long long)r.count);
      return 2;
    }
    values += r.count;
    out_bytes = std::max<int64_t>(out_bytes, r.count / block.elements * block.bytes);
  }
  std::vector<uint8_t> out(static_cast<size_t>(out_bytes));
  const auto run = [&](auto&& quantize_one) {
    for (const Range& r : ranges) quantize_one(reinterpret_cast<const float*>(base + r.offset), r.count);
  };
  std::printf("simd %s, %s, %zu tensors, %lld values (%.1f MB as f32)\n", simd_level().c_str(),
              ggml_quant_type_name(type), ranges.size(), (long long)values, double(values) * 4 / 1e6);
  const double reference_s = best_seconds(std::max(1, reps / 2), [&] {
    run([&](const float* x, int64_t n) { ggml_quantize_reference(type, x, n, out.data()); });
  });
  std::printf("RESULT ferry_definition 1 %.9g %lld\n", reference_s, (long long)values);
  std::printf("  definition (scalar, as llama.cpp's C), 1 thread: %.3f s, %.1f M values/s\n", reference_s,
              double(values) / reference_s / 1e6);
  for (const SimdLevel level : {SimdLevel::avx2, SimdLevel::avx512}) {  // each SIMD path, one thread
    if (!cpu_supports(level)) continue;
    const double s = best_seconds(reps, [&] {
      run([&](const float* x, int64_t n) { ggml_quantize_at(level, type, x, n, out.data()); });
    });
    std::printf("RESULT ferry_%s 1 %.9g %lld\n", simd_level_name(level), s, (long long)values);
    std::printf("  %s path, 1 thread: %.3f s, %.1f M values/s\n", simd_level_name(level), s, double(values) / s / 1e6);
  }
  for (const int t : threads) {
    ThreadPool pool(t);
    const double s = best_seconds(reps, [&] {
      run([&](const float* x, int64_t n) { ggml_quantize(type, x, n, out.data(), &pool); });
    });
    std::printf("RESULT ferry %d %.9g %lld\n", t, s, (long long)values);
    std::printf("  ggml_quantize (%s), %d thread%s: %.3f s, %.1f M values/s\n", simd_level().c_str(), t,
                t == 1 ? "" : "s", s, double(values) / s / 1e6);
  }
  munmap(mapped, size_t(st.st_size));
  close(fd);
  return 0;
}
