// CpuAdamW throughput: Ferry's SIMD AdamW against torch::optim::AdamW (C++ frontend) on the same
// CPU tensors, and against the machine's memory bandwidth (a STREAM-style triad measured in the
// same run). An fp32 AdamW step moves 28 bytes per parameter (reads master, m, v, grad: 16;
// writes master, m, v: 12), so bandwidth / 28 is the most parameters per second any
// implementation can update. That triad bound is optimistic for AdamW's access pattern (four
// streams in, three out, 43% writes, against the triad's two in, one out), so the run also times
// the same traffic with no arithmetic at all (p += g, m += g, v += g: the "same-traffic stream"),
// the tighter bound for any AdamW on this memory. Also times at::_fused_adamw_
// (torch.optim.AdamW(fused=True)'s CPU kernel) alternately with Ferry. scripts/bench-adamw.sh runs this next to the Python optimizers.
// The int8-moment AdamW (adamw_int8.h, offload.optimizer_state: int8) moves ~16 bytes per parameter
// instead of 28 (1-byte moments, a scale per 256 parameters); it is timed alternately with the fp32
// kernel, and against its own same-traffic stream (its loads and stores with no arithmetic).
//
//   cpu_adamw_bench [--sizes 50,100,200] [--threads N] [--reps N] [--torch-steps N] [--no-torch]
//
// Prints one "RESULT <what> <millions of params> <params per second>" line per figure, plus
// human-readable lines; every figure is the best of --reps runs (the machine may be shared).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_int8.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"

namespace {

using namespace ferry::kernels;
using Clock = std::chrono::steady_clock;

constexpr double kAdamWBytesPerParam = 28;  // fp32: read p, m, v, g; write p, m, v
// int8 moments, fp32 gradient: read p, g (4 + 4), m, v codes (1 + 1); write p, m, v (4 + 1 + 1);
// plus two scales read and written per 256 parameters.
constexpr double kInt8BytesPerParam = 16 + 16.0 / kInt8MomentBlock;
constexpr double kTriadBytesPerElement = 24;  // STREAM's count: read b, c; write a

struct Options {
  std::vector<int64_t> sizes_m = {50, 100, 200};
  int threads = 0;
  int reps = 5;
  int torch_steps = 2;
  bool torch = true;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--sizes") {
      o.sizes_m.clear();
      std::string list = next();
      for (size_t pos = 0; pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        o.sizes_m.push_back(std::stoll(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (a == "--threads") {
      o.threads = std::stoi(next());
    } else if (a == "--reps") {
      o.reps = std::max(1, std::stoi(next()));
    } else if (a == "--torch-steps") {
      o.torch_steps = std::max(1, std::stoi(next()));
    } else if (a == "--no-torch") {
      o.torch = false;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

// 64-byte aligned, uninitialised; first touched by the pool so pages spread over the threads.
template <class T>
struct Buffer {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data;
  explicit Buffer(int64_t n)
      : data(static_cast<T*>(std::aligned_alloc(64, ((size_t(n) * sizeof(T) + 63) / 64) * 64))) {
    if (!data) {
      std::fprintf(stderr, "out of memory allocating %lld elements\n", (long long)n);
      std::exit(1);
    }
  }
  T* get() const { return data.get(); }
};

// The moments of parameters [begin, ...) of a larger state; begin is a multiple of kInt8MomentBlock.
Int8Moments adamw_int8_offset(const Int8Moments& q, int64_t begin) {
  const int64_t block = begin / kInt8MomentBlock;
  return {q.exp_avg + begin, q.exp_avg_scale + block, q.exp_avg_sq + begin, q.exp_avg_sq_scale + block};
}

// Cheap deterministic values in [-1, 1): filling 200M elements with torch::randn would take longer
// than the benchmark.
inline float hash_to_unit(uint64_t i) {
  i ^= i >> 33;
  i *= 0xff51afd7ed558ccdULL;
  i ^= i >> 33;
  return float(int32_t(uint32_t(i))) * 0x1p-31f;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

template <class Fn>
double best_seconds(int reps, Fn&& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t = Clock::now();
    fn();
    best = std::min(best, seconds_since(t));
  }
  return best;
}

void result(const char* what, int64_t size_m, double per_second, const char* note = "") {
  std::printf("RESULT %s %lld %.6g\n", what, (long long)size_m, per_second);
  std::printf("  %-28s %4lldM params: %8.1f M params/s %s\n", what, (long long)size_m, per_second / 1e6, note);
  std::fflush(stdout);
}

// --- STREAM-style triad a[i] = b[i] + s*c[i] ------------------------------------------------------

void triad_plain(float* a, const float* b, const float* c, float s, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
}

#if defined(__x86_64__)
// Non-temporal stores skip reading a's lines before writing them, as STREAM's best builds do;
// ranges start at multiples of 4096 elements of 64-byte aligned buffers.
__attribute__((target("avx512f"))) void triad_streaming_avx512(float* a, const float* b, const float* c,
                                                                float s, int64_t begin, int64_t end) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    _mm512_stream_ps(a + i, _mm512_fmadd_ps(vs, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
  }
  for (; i < end; ++i) a[i] = b[i] + s * c[i];
}

__attribute__((target("avx2,fma"))) void triad_streaming_avx2(float* a, const float* b, const float* c, float s,
                                                               int64_t begin, int64_t end) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    _mm256_stream_ps(a + i, _mm256_fmadd_ps(vs, _mm256_load_ps(c + i), _mm256_load_ps(b + i)));
  }
  for (; i < end; ++i) a[i] = b[i] + s * c[i];
}

// AdamW's memory traffic and nothing else: read p, m, v, g; write p, m, v (plain stores, as
// AdamW's). Vectorized by hand so the figure is the memory's, not the compiler's.
__attribute__((target("avx2"))) void same_traffic_avx2(float* p, float* m, float* v, const float* g,
                                                       int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    _mm256_storeu_ps(p + i, _mm256_add_ps(_mm256_loadu_ps(p + i), x));
    _mm256_storeu_ps(m + i, _mm256_add_ps(_mm256_loadu_ps(m + i), x));
    _mm256_storeu_ps(v + i, _mm256_add_ps(_mm256_loadu_ps(v + i), x));
  }
  for (; i < end; ++i) {
    p[i] += g[i];
    m[i] += g[i];
    v[i] += g[i];
  }
}
#endif

void same_traffic(float* p, float* m, float* v, const float* g, int64_t begin, int64_t end) {
#if defined(__x86_64__)
  if (cpu_supports(SimdLevel::avx2)) return same_traffic_avx2(p, m, v, g, begin, end);
#endif
  for (int64_t i = begin; i < end; ++i) {
    p[i] += g[i];
    m[i] += g[i];
    v[i] += g[i];
  }
}

// Parameters per second of the same-traffic stream over n parameters.
double measure_same_traffic_rate(ThreadPool& pool, int64_t n, int reps) {
  Buffer<float> p(n), m(n), v(n), g(n);
  pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p.get()[i] = m.get()[i] = v.get()[i] = g.get()[i] = 1e-3f;
  });
  const double seconds = best_seconds(reps, [&] {
    pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) { same_traffic(p.get(), m.get(), v.get(), g.get(), begin, end); });
  });
  std::printf("  same-traffic stream         %8.2f GB/s = %.1f M params/s (AdamW's loads and stores, no math)\n",
              kAdamWBytesPerParam * n / seconds / 1e9, n / seconds / 1e6);
  return n / seconds;
}

// The int8 update's memory traffic and nothing else: read p, g, the m and v codes and the block
// scales; write p, the codes and the scales (plain stores, as the update's). Ranges start on block
// boundaries (multiples of 4096 parameters).
#if defined(__x86_64__)
__attribute__((target("avx2"))) void int8_same_traffic_avx2(float* p, const float* g, int8_t* m, uint8_t* v,
                                                            float* m_scale, float* v_scale, int64_t begin,
                                                            int64_t end) {
  const __m256i one = _mm256_set1_epi8(1);
  int64_t i = begin;
  for (; i + 32 <= end; i += 32) {
    for (int k = 0; k < 32; k += 8) {
      _mm256_storeu_ps(p + i + k, _mm256_add_ps(_mm256_loadu_ps(p + i + k), _mm256_loadu_ps(g + i + k)));
    }
    auto* mi = reinterpret_cast<__m256i*>(m + i);
    auto* vi = reinterpret_cast<__m256i*>(v + i);
    _mm256_storeu_si256(mi, _mm256_add_epi8(_mm256_loadu_si256(mi), one));
    _mm256_storeu_si256(vi, _mm256_add_epi8(_mm256_loadu_si256(vi), one));
    if (i % kInt8MomentBlock == 0) {
      m_scale[i / kInt8MomentBlock] += 1.0f;
      v_scale[i / kInt8MomentBlock] += 1.0f;
    }
  }
  for (; i < end; ++i) {
    p[i] += g[i];
    ++m[i];
    ++v[i];
  }
}
#endif

void int8_same_traffic(float* p, const float* g, int8_t* m, uint8_t* v, float* m_scale, float* v_scale,
                       int64_t begin, int64_t end) {
#if defined(__x86_64__)
  if (cpu_supports(SimdLevel::avx2)) return int8_same_traffic_avx2(p, g, m, v, m_scale, v_scale, begin, end);
#endif
  for (int64_t i = begin; i < end; ++i) {
    p[i] += g[i];
    ++m[i];
    ++v[i];
    if (i % kInt8MomentBlock == 0) {
      m_scale[i / kInt8MomentBlock] += 1.0f;
      v_scale[i / kInt8MomentBlock] += 1.0f;
    }
  }
}

// Parameters per second of the int8 update's same-traffic stream over n parameters.
double measure_int8_same_traffic_rate(ThreadPool& pool, int64_t n, int reps) {
  const int64_t blocks = int8_moment_blocks(n);
  Buffer<float> p(n), g(n), m_scale(blocks), v_scale(blocks);
  Buffer<int8_t> m(n);
  Buffer<uint8_t> v(n);
  pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      p.get()[i] = g.get()[i] = 1e-3f;
      m.get()[i] = 0;
      v.get()[i] = 0;
      if (i % kInt8MomentBlock == 0) m_scale.get()[i / kInt8MomentBlock] = v_scale.get()[i / kInt8MomentBlock] = 0;
    }
  });
  const double seconds = best_seconds(reps, [&] {
    pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
      int8_same_traffic(p.get(), g.get(), m.get(), v.get(), m_scale.get(), v_scale.get(), begin, end);
    });
  });
  std::printf("  int8 same-traffic stream    %8.2f GB/s = %.1f M params/s (the int8 update's loads and stores)\n",
              kInt8BytesPerParam * n / seconds / 1e9, n / seconds / 1e6);
  return n / seconds;
}

// Returns the better of the plain and streaming triads, in bytes per second (STREAM's count).
double measure_triad_bandwidth(ThreadPool& pool, int64_t n, int reps) {
  Buffer<float> a(n), b(n), c(n);
  pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      a.get()[i] = 0;
      b.get()[i] = 1;
      c.get()[i] = 2;
    }
  });
  const double plain = best_seconds(reps, [&] {
    pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) { triad_plain(a.get(), b.get(), c.get(), 3.0f, begin, end); });
  });
  double best = plain;
  std::printf("  triad (plain stores)        %8.2f GB/s\n", kTriadBytesPerElement * n / plain / 1e9);
#if defined(__x86_64__)
  using Triad = void (*)(float*, const float*, const float*, float, int64_t, int64_t);
  const Triad streaming_triad = cpu_supports(SimdLevel::avx512) ? triad_streaming_avx512
                                : cpu_supports(SimdLevel::avx2) ? triad_streaming_avx2
                                                                 : nullptr;
  if (streaming_triad) {
    const double streaming = best_seconds(reps, [&] {
      pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
        streaming_triad(a.get(), b.get(), c.get(), 3.0f, begin, end);
      });
      _mm_sfence();
    });
    std::printf("  triad (streaming stores)    %8.2f GB/s\n", kTriadBytesPerElement * n / streaming / 1e9);
    best = std::min(best, streaming);
  }
#endif
  return kTriadBytesPerElement * n / best;
}

// --- per-call cost --------------------------------------------------------------------------------

void measure_call_overhead(ThreadPool& pool) {
  constexpr int kCalls = 20000;
  const auto t = Clock::now();
  std::atomic<int64_t> sink{0};
  for (int i = 0; i < kCalls; ++i) {
    pool.parallel_for(1 << 20, 4096, [&](int64_t begin, int64_t end) { sink.fetch_add(end - begin, std::memory_order_relaxed); });
  }
  std::printf("  parallel_for, trivial body: %8.2f us per call (%d threads)\n", seconds_since(t) / kCalls * 1e6,
              pool.num_threads());
}

// The engine updates chunk by chunk: the same 100M parameters as one call and as 4M-param chunks.
void measure_chunked(ThreadPool& pool, int reps) {
  const int64_t n = 100'000'000, chunk = 4'000'000;
  Buffer<float> p(n), m(n), v(n), g(n);
  pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      p.get()[i] = hash_to_unit(uint64_t(i));
      g.get()[i] = hash_to_unit(uint64_t(i) + n);
      m.get()[i] = v.get()[i] = 0;
    }
  });
  AdamWParams params;
  const double whole = best_seconds(reps, [&] {
    adamw_update(params, p.get(), m.get(), v.get(), g.get(), GradType::f32, 1.0f, nullptr, WeightOutType::none, n, &pool);
  });
  const double chunked = best_seconds(reps, [&] {
    for (int64_t at = 0; at < n; at += chunk) {
      adamw_update(params, p.get() + at, m.get() + at, v.get() + at, g.get() + at, GradType::f32, 1.0f, nullptr,
                   WeightOutType::none, std::min(chunk, n - at), &pool);
    }
  });
  std::printf("  100M params as one call:    %8.1f M params/s\n", n / whole / 1e6);
  std::printf("  100M params as 4M chunks:   %8.1f M params/s (%+.1f us per call)\n", n / chunked / 1e6,
              (chunked - whole) / double(n / chunk) * 1e6);
}

// --- AdamW at one size ------------------------------------------------------------------------------

void bench_size(ThreadPool& pool, int64_t size_m, const Options& o, double triad_bound, double traffic_bound,
                double int8_traffic_bound) {
  const int64_t n = size_m * 1'000'000;
  Buffer<float> p(n), m(n), v(n), g(n);
  Buffer<uint16_t> g16(n), out16(n);
  // The int8 kernel's moments (its master weights are p, updated by both kernels in turn).
  const int64_t blocks = int8_moment_blocks(n);
  Buffer<int8_t> m8(n);
  Buffer<uint8_t> v8(n);
  Buffer<float> m8_scale(blocks), v8_scale(blocks);
  const Int8Moments moments{m8.get(), m8_scale.get(), v8.get(), v8_scale.get()};
  pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      p.get()[i] = hash_to_unit(uint64_t(i));
      g.get()[i] = hash_to_unit(uint64_t(i) + uint64_t(n));
      g16.get()[i] = uint16_t(std::bit_cast<uint32_t>(g.get()[i]) >> 16);
      m.get()[i] = v.get()[i] = 0;
      out16.get()[i] = 0;
    }
    // Ranges are multiples of 4096 parameters, so whole blocks.
    zero_int8_moments(adamw_int8_offset(moments, begin), end - begin);
  });
  AdamWParams params;
  int64_t step = 0;
  auto ferry_step = [&](GradType gt, WeightOutType ot) {
    params.step = ++step;
    const void* grad = gt == GradType::f32 ? static_cast<const void*>(g.get()) : g16.get();
    adamw_update(params, p.get(), m.get(), v.get(), grad, gt, 1.0f, ot == WeightOutType::none ? nullptr : out16.get(), ot,
                 n, &pool);
  };
  ferry_step(GradType::f32, WeightOutType::none);  // warm-up
  int64_t int8_step_count = 0;
  auto int8_step = [&](GradType gt, WeightOutType ot) {
    AdamWParams int8_params;
    int8_params.step = ++int8_step_count;
    const void* grad = gt == GradType::f32 ? static_cast<const void*>(g.get()) : g16.get();
    adamw_update_int8(int8_params, p.get(), moments, grad, gt, 1.0f, ot == WeightOutType::none ? nullptr : out16.get(),
                      ot, n, &pool);
  };
  int8_step(GradType::f32, WeightOutType::none);  // warm-up
  // ATen's fused AdamW (what torch.optim.AdamW(fused=True) runs) on copies of the same state,
  // timed alternately with Ferry's so both see the same load on a shared machine.
  torch::Tensor fused_p, fused_g, fused_m, fused_v, fused_step;
  if (o.torch) {
    fused_p = torch::from_blob(p.get(), {n}, torch::kFloat32).clone();
    fused_g = torch::from_blob(g.get(), {n}, torch::kFloat32).clone();
    fused_m = torch::zeros({n});
    fused_v = torch::zeros({n});
    fused_step = torch::zeros({}, torch::kFloat32);
  }
  auto fused_once = [&] {
    fused_step.add_(1);
    at::_fused_adamw_({fused_p}, {fused_g}, {fused_m}, {fused_v}, {}, {fused_step}, params.lr, params.beta1,
                      params.beta2, params.weight_decay, params.eps, false, false);
  };
  double f32 = 1e30, fused = 1e30, int8 = 1e30;
  if (o.torch) fused_once();  // warm-up
  for (int r = 0; r < o.reps; ++r) {
    f32 = std::min(f32, best_seconds(1, [&] { ferry_step(GradType::f32, WeightOutType::none); }));
    if (o.torch) fused = std::min(fused, best_seconds(1, fused_once));
  }
  // The int8 update alternates with the fp32 one alone: right after ATen's step (whose copies of the
  // state add 16 B/param of dirty memory) either kernel runs up to 25% slower on this VM.
  for (int r = 0; r < o.reps; ++r) {
    f32 = std::min(f32, best_seconds(1, [&] { ferry_step(GradType::f32, WeightOutType::none); }));
    int8 = std::min(int8, best_seconds(1, [&] { int8_step(GradType::f32, WeightOutType::none); }));
  }
  char note[160];
  std::snprintf(note, sizeof note, "(%.0f%% of the triad bound, %.0f%% of the same-traffic stream, %.2f GB/s)",
                100 * (n / f32) / triad_bound, 100 * (n / f32) / traffic_bound, kAdamWBytesPerParam * n / f32 / 1e9);
  result("ferry_f32", size_m, n / f32, note);
  double bf16 = 1e30, int8_bf16 = 1e30;
  for (int r = 0; r < o.reps; ++r) {
    bf16 = std::min(bf16, best_seconds(1, [&] { ferry_step(GradType::bf16, WeightOutType::bf16); }));
    int8_bf16 = std::min(int8_bf16, best_seconds(1, [&] { int8_step(GradType::bf16, WeightOutType::bf16); }));
  }
  result("ferry_bf16grad_bf16out", size_m, n / bf16);
  std::snprintf(note, sizeof note, "(%.2fx Ferry fp32, %.0f%% of the int8 same-traffic stream, %.2f GB/s)", f32 / int8,
                100 * (n / int8) / int8_traffic_bound, kInt8BytesPerParam * n / int8 / 1e9);
  result("ferry_int8_f32", size_m, n / int8, note);
  std::snprintf(note, sizeof note, "(%.2fx Ferry fp32 bf16 grad + bf16 out)", bf16 / int8_bf16);
  result("ferry_int8_bf16grad_bf16out", size_m, n / int8_bf16, note);
  if (o.torch) {
    result("aten_fused_adamw", size_m, n / fused, "(same kernel as torch.optim.AdamW(fused=True))");
    fused_p = fused_g = fused_m = fused_v = torch::Tensor();
  }

  if (!o.torch) return;
  // torch::optim::AdamW on the same buffers (its m and v are its own, allocated at the first step).
  torch::NoGradGuard no_grad;
  torch::Tensor param = torch::from_blob(p.get(), {n}, torch::kFloat32);
  param.mutable_grad() = torch::from_blob(g.get(), {n}, torch::kFloat32);
  torch::optim::AdamW adamw({param}, torch::optim::AdamWOptions(1e-3).weight_decay(1e-2));
  adamw.step();  // warm-up, creates the state
  const double t = best_seconds(o.torch_steps, [&] { adamw.step(); });
  param.mutable_grad() = torch::Tensor();
  result("torch_cpp_adamw", size_m, n / t);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  ThreadPool pool(o.threads);
  at::set_num_threads(pool.num_threads());
  std::printf("cpu_adamw_bench: %d threads, SIMD path %s, libtorch %s with %d threads\n", pool.num_threads(),
              simd_level().c_str(), TORCH_VERSION, at::get_num_threads());

  // 3 x 400 MB: far beyond any cache.
  const double triad = measure_triad_bandwidth(pool, 100'000'000, o.reps);
  const double bound = triad / kAdamWBytesPerParam;
  std::printf("  AdamW bound = triad / %.0f B = %.1f M params/s\n", kAdamWBytesPerParam, bound / 1e6);
  std::printf("RESULT triad_bytes_per_s 0 %.6g\n", triad);
  std::printf("RESULT adamw_bound 0 %.6g\n", bound);
  const double traffic = measure_same_traffic_rate(pool, 100'000'000, o.reps);
  std::printf("RESULT same_traffic 0 %.6g\n", traffic);
  const double int8_traffic = measure_int8_same_traffic_rate(pool, 100'000'000, o.reps);
  std::printf("RESULT int8_same_traffic 0 %.6g\n", int8_traffic);
  measure_call_overhead(pool);
  measure_chunked(pool, o.reps);
  for (int64_t size_m : o.sizes_m) bench_size(pool, size_m, o, bound, traffic, int8_traffic);
  return 0;
}
