// CpuAdamW and its thread pool: every SIMD path against the scalar definition (bit for bit), the
// definition against torch (torch::optim::AdamW, the C++ frontend, and ATen's fused AdamW, the
// kernel behind torch.optim.AdamW(fused=True)), and the bf16/fp16 conversions against torch's.
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

constexpr int kSteps = 5;
const int64_t kSizes[] = {1, 7, 15, 16, 17, 1000003};

std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
    if (cpu_supports(level)) levels.push_back(level);
  }
  return levels;
}

torch::Dtype torch_dtype(GradType t) {
  return t == GradType::f32 ? torch::kFloat32 : t == GradType::bf16 ? torch::kBFloat16 : torch::kHalf;
}
torch::Dtype torch_dtype(WeightOutType t) {
  return t == WeightOutType::bf16 ? torch::kBFloat16 : torch::kHalf;
}
const char* name(GradType t) { return t == GradType::f32 ? "f32" : t == GradType::bf16 ? "bf16" : "f16"; }
const char* name(WeightOutType t) {
  return t == WeightOutType::none ? "none" : t == WeightOutType::bf16 ? "bf16" : "f16";
}

// One parameter tensor's optimizer state, as contiguous fp32 CPU tensors.
struct State {
  torch::Tensor master, exp_avg, exp_avg_sq;
  State clone() const { return {master.clone(), exp_avg.clone(), exp_avg_sq.clone()}; }
};

State initial_state(int64_t n, uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::rand({n}) * 2 - 1, torch::zeros({n}), torch::zeros({n})};
}

// Gradients for each step, already in the wire type (bf16/fp16 keep torch's rounding).
std::vector<torch::Tensor> gradients(int64_t n, GradType type, uint64_t seed) {
  torch::manual_seed(seed + 1000);
  std::vector<torch::Tensor> grads;
  for (int s = 0; s < kSteps; ++s) grads.push_back(torch::randn({n}).to(torch_dtype(type)));
  return grads;
}

void expect_bitwise_equal(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  ASSERT_EQ(a.element_size(), b.element_size()) << what;
  const int64_t bytes = a.numel() * a.element_size();
  if (std::memcmp(a.data_ptr(), b.data_ptr(), size_t(bytes)) == 0) return;
  const auto differ = a.view(torch::kUInt8).ne(b.view(torch::kUInt8)).nonzero();
  const int64_t first = differ[0].item<int64_t>() / a.element_size();
  ADD_FAILURE() << what << ": not bitwise equal; first difference at element " << first << ": "
                << a.to(torch::kFloat64)[first].item<double>() << " vs "
                << b.to(torch::kFloat64)[first].item<double>();
}

// |a-b| <= atol + rtol*|b| everywhere (torch.allclose), reporting the worst element and how many
// elements differ at all. atol is the rounding scale of the inputs (values near zero come from
// cancellation and keep the absolute error of the larger terms).
void expect_close(const torch::Tensor& a, const torch::Tensor& b, double rtol, double atol,
                  const std::string& what) {
  const auto a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
  const auto excess = (a64 - b64).abs() - (b64.abs() * rtol + atol);
  const int64_t worst = excess.argmax().item<int64_t>();
  const int64_t differing = a.ne(b).sum().item<int64_t>();
  EXPECT_LE(excess[worst].item<double>(), 0.0)
      << what << ": worst element " << worst << ": " << a64[worst].item<double>() << " vs "
      << b64[worst].item<double>() << " (" << differing << " of " << a.numel() << " elements differ)";
  if (std::getenv("FERRY_TEST_VERBOSE")) {
    std::printf("    %s: %lld of %lld elements not bitwise equal, max |diff| %.3g\n", what.c_str(),
                (long long)differing, (long long)a.numel(), (a64 - b64).abs().max().item<double>());
  }
}

// AdamW's defaults (lr 1e-3, betas 0.9 / 0.999, eps 1e-8) with this decay and step.
AdamWParams params_for(double weight_decay, int64_t step) { return {.weight_decay = weight_decay, .step = step}; }

// Runs kSteps updates at `level` (or threaded adamw_update when pool is given).
State run_ferry(State s, const std::vector<torch::Tensor>& grads, GradType grad_type, double wd,
                float grad_scale, WeightOutType out_type, torch::Tensor* weight_out,
                std::optional<SimdLevel> level, ThreadPool* pool = nullptr) {
  const int64_t n = s.master.numel();
  for (int step = 1; step <= kSteps; ++step) {
    const AdamWParams p = params_for(wd, step);
    void* out = nullptr;
    if (out_type != WeightOutType::none) {
      *weight_out = torch::empty({n}, torch_dtype(out_type));
      out = weight_out->data_ptr();
    }
    const void* g = grads[size_t(step - 1)].data_ptr();
    float* master = s.master.data_ptr<float>();
    float* m = s.exp_avg.data_ptr<float>();
    float* v = s.exp_avg_sq.data_ptr<float>();
    if (level) {
      adamw_update_at(*level, p, master, m, v, g, grad_type, grad_scale, out, out_type, n);
    } else {
      adamw_update(p, master, m, v, g, grad_type, grad_scale, out, out_type, n, pool);
    }
  }
  return s;
}

// --- every SIMD path against the definition, bit for bit ----------------------------------------

TEST(AdamW, EveryPathMatchesTheReferenceBitForBit) {
  for (GradType grad_type : {GradType::f32, GradType::bf16, GradType::f16}) {
    for (int64_t n : kSizes) {
      const State start = initial_state(n, uint64_t(n) * 31 + 7);
      const auto grads = gradients(n, grad_type, uint64_t(n));
      for (WeightOutType out_type : {WeightOutType::none, WeightOutType::bf16, WeightOutType::f16}) {
        for (double wd : {0.0, 0.1}) {
          for (float grad_scale : {1.0f, 0.37f}) {
            const std::string config = std::string("grad=") + name(grad_type) + " out=" + name(out_type) +
                                       " n=" + std::to_string(n) + " wd=" + std::to_string(wd) +
                                       " scale=" + std::to_string(grad_scale);
            torch::Tensor out_ref;
            const State ref = run_ferry(start.clone(), grads, grad_type, wd, grad_scale, out_type, &out_ref,
                                        SimdLevel::scalar);
            if (out_type != WeightOutType::none) {
              // The 16-bit weights are the new master weights rounded the way torch rounds.
              expect_bitwise_equal(out_ref, ref.master.to(torch_dtype(out_type)), config + " weight_out vs torch");
            }
            for (SimdLevel level : supported_levels()) {
              if (level == SimdLevel::scalar) continue;
              SCOPED_TRACE(std::string(simd_level_name(level)) + " " + config);
              torch::Tensor out_fast;
              const State fast = run_ferry(start.clone(), grads, grad_type, wd, grad_scale, out_type, &out_fast, level);
              expect_bitwise_equal(fast.master, ref.master, "master");
              expect_bitwise_equal(fast.exp_avg, ref.exp_avg, "exp_avg");
              expect_bitwise_equal(fast.exp_avg_sq, ref.exp_avg_sq, "exp_avg_sq");
              if (out_type != WeightOutType::none) expect_bitwise_equal(out_fast, out_ref, "weight_out");
            }
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST(AdamW, ThreadedUpdateMatchesTheReference) {
  const int64_t n = 3'000'017;  // several ranges per thread, plus an odd tail
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (GradType grad_type : {GradType::f32, GradType::bf16}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, grad " + name(grad_type));
      const State start = initial_state(n, 5);
      const auto grads = gradients(n, grad_type, 6);
      torch::Tensor out_fast, out_ref;
      const State fast = run_ferry(start.clone(), grads, grad_type, 0.1, 1.0f, WeightOutType::bf16, &out_fast,
                                   std::nullopt, &pool);
      const State ref = run_ferry(start.clone(), grads, grad_type, 0.1, 1.0f, WeightOutType::bf16, &out_ref,
                                  SimdLevel::scalar);
      expect_bitwise_equal(fast.master, ref.master, "master");
      expect_bitwise_equal(fast.exp_avg, ref.exp_avg, "exp_avg");
      expect_bitwise_equal(fast.exp_avg_sq, ref.exp_avg_sq, "exp_avg_sq");
      expect_bitwise_equal(out_fast, out_ref, "weight_out");
    }
  }
}

// --- the definition against torch ---------------------------------------------------------------

// torch::optim::AdamW (C++ frontend): unfused ops, m = m*b1 + (1-b1)*g rather than a lerp, so
// agreement is to rounding, not bitwise.
TEST(AdamW, MatchesTorchOptimAdamW) {
  for (GradType grad_type : {GradType::f32, GradType::bf16, GradType::f16}) {
    for (int64_t n : kSizes) {
      for (double wd : {0.0, 0.1}) {
        const std::string config = std::string("grad=") + name(grad_type) + " n=" + std::to_string(n) +
                                   " wd=" + std::to_string(wd);
        const State start = initial_state(n, uint64_t(n) + 11);
        const auto grads = gradients(n, grad_type, uint64_t(n) + 12);
        torch::Tensor param = start.master.clone();
        torch::optim::AdamW torch_adamw({param}, torch::optim::AdamWOptions(1e-3)
                                                     .betas({0.9, 0.999})
                                                     .eps(1e-8)
                                                     .weight_decay(wd));
        for (const auto& g : grads) {
          param.mutable_grad() = g.to(torch::kFloat32);
          torch_adamw.step();
        }
        auto& state = static_cast<torch::optim::AdamWParamState&>(
            *torch_adamw.state().at(param.unsafeGetTensorImpl()));
        for (SimdLevel level : supported_levels()) {
          SCOPED_TRACE(std::string(simd_level_name(level)) + " " + config);
          const State ours = run_ferry(start.clone(), grads, grad_type, wd, 1.0f, WeightOutType::none, nullptr, level);
          // Inputs are O(1) (master, grad) and O(1e-3) (exp_avg_sq): atol is a few fp32 ulps of those.
          expect_close(ours.master, param, 1e-6, 1e-7, "master");
          expect_close(ours.exp_avg, state.exp_avg(), 1e-6, 1e-7, "exp_avg");
          expect_close(ours.exp_avg_sq, state.exp_avg_sq(), 1e-6, 1e-10, "exp_avg_sq");
        }
      }
    }
  }
}

// ATen's fused CPU AdamW, the kernel torch.optim.AdamW(fused=True) runs: same operations as ours.
TEST(AdamW, MatchesTorchFusedAdamW) {
  for (int64_t n : kSizes) {
    for (double wd : {0.0, 0.1}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " wd=" + std::to_string(wd));
      const State start = initial_state(n, uint64_t(n) + 21);
      const auto grads = gradients(n, GradType::f32, uint64_t(n) + 22);
      const State ours = run_ferry(start.clone(), grads, GradType::f32, wd, 1.0f, WeightOutType::none, nullptr,
                                   best_simd_level());
      State theirs = start.clone();
      torch::Tensor step = torch::zeros({}, torch::kFloat32);
      for (const auto& g : grads) {
        step.add_(1);
        at::_fused_adamw_({theirs.master}, {g.clone()}, {theirs.exp_avg}, {theirs.exp_avg_sq}, {}, {step},
                          1e-3, 0.9, 0.999, wd, 1e-8, /*amsgrad=*/false, /*maximize=*/false);
      }
      expect_close(ours.master, theirs.master, 1e-6, 1e-7, "master");
      expect_close(ours.exp_avg, theirs.exp_avg, 1e-6, 1e-7, "exp_avg");
      expect_close(ours.exp_avg_sq, theirs.exp_avg_sq, 1e-6, 1e-10, "exp_avg_sq");
    }
  }
}

TEST(AdamW, GradScaleMultipliesTheGradient) {
  const int64_t n = 1001;
  const State start = initial_state(n, 3);
  const auto grads = gradients(n, GradType::f32, 4);
  std::vector<torch::Tensor> prescaled;
  for (const auto& g : grads) prescaled.push_back(g * 0.25f);
  const State scaled = run_ferry(start.clone(), grads, GradType::f32, 0.1, 0.25f, WeightOutType::none, nullptr,
                                 best_simd_level());
  const State direct = run_ferry(start.clone(), prescaled, GradType::f32, 0.1, 1.0f, WeightOutType::none, nullptr,
                                 best_simd_level());
  expect_bitwise_equal(scaled.master, direct.master, "master");
  expect_bitwise_equal(scaled.exp_avg_sq, direct.exp_avg_sq, "exp_avg_sq");
}

TEST(AdamW, RejectsBadArguments) {
  float x = 0;
  uint16_t h = 0;
  EXPECT_THROW(adamw_update(params_for(0, 0), &x, &x, &x, &x, GradType::f32, 1, nullptr, WeightOutType::none, 1),
               InternalError);  // step is 1-based
  EXPECT_THROW(adamw_update(params_for(0, 1), &x, &x, &x, &x, GradType::f32, 1, nullptr, WeightOutType::bf16, 1),
               InternalError);  // output type without a buffer
  EXPECT_THROW(adamw_update(params_for(0, 1), &x, &x, &x, &x, GradType::f32, 1, &h, WeightOutType::none, 1),
               InternalError);  // buffer without an output type
  EXPECT_NO_THROW(adamw_update(params_for(0, 1), nullptr, nullptr, nullptr, nullptr, GradType::f32, 1, nullptr,
                               WeightOutType::none, 0));
}

// --- 16-bit conversions against torch -----------------------------------------------------------

// Floats that exercise rounding: every exponent, ties, subnormals, overflow edges.
torch::Tensor awkward_floats() {
  torch::manual_seed(99);
  auto bits = torch::randint(0, int64_t(1) << 31, {1 << 20}, torch::kInt64);
  std::vector<float> values(size_t(bits.numel()));
  auto acc = bits.accessor<int64_t, 1>();
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t u = uint32_t(acc[int64_t(i)]) & 0x7fffffffu;
    if (u >= 0x7f800000u) u &= 0x7f7fffffu;  // finite only (NaN encodings are not compared)
    if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u;  // bf16 ties
    if (i % 4 == 2) u = (u & 0xffffe000u) | 0x1000u;  // fp16 ties
    if (i % 8 == 3) u = 0x33000000u + (u % 0x14000000u);  // around fp16 subnormals and max
    values[i] = std::bit_cast<float>(u | (i % 2 ? 0x80000000u : 0u));
  }
  for (float edge : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f,
                     3.3895314e38f, 1e-45f}) {
    values.push_back(edge);
  }
  return torch::from_blob(values.data(), {int64_t(values.size())}, torch::kFloat32).clone();
}

TEST(HalfConvert, FloatToBf16AndFp16RoundLikeTorch) {
  const auto x = awkward_floats();
  const auto torch_bf16 = x.to(torch::kBFloat16), torch_f16 = x.to(torch::kHalf);
  auto ours_bf16 = torch::empty_like(torch_bf16), ours_f16 = torch::empty_like(torch_f16);
  const float* in = x.data_ptr<float>();
  auto* out_bf16 = static_cast<uint16_t*>(ours_bf16.data_ptr());
  auto* out_f16 = static_cast<uint16_t*>(ours_f16.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) {
    out_bf16[i] = float_to_bf16(in[i]);
    out_f16[i] = float_to_fp16(in[i]);
  }
  expect_bitwise_equal(ours_bf16, torch_bf16, "bf16");
  expect_bitwise_equal(ours_f16, torch_f16, "fp16");
}

TEST(HalfConvert, EverySixteenBitPatternWidensLikeTorch) {
  auto bits = torch::arange(0, 65536, torch::kInt32).to(torch::kInt16);
  const auto as_bf16 = bits.view(torch::kBFloat16), as_f16 = bits.view(torch::kHalf);
  const auto torch_bf16 = as_bf16.to(torch::kFloat32), torch_f16 = as_f16.to(torch::kFloat32);
  auto ours_bf16 = torch::empty({65536}), ours_f16 = torch::empty({65536});
  float* ob = ours_bf16.data_ptr<float>();
  float* of = ours_f16.data_ptr<float>();
  for (uint32_t i = 0; i < 65536; ++i) {
    ob[i] = bf16_to_float(uint16_t(i));
    of[i] = fp16_to_float(uint16_t(i));
  }
  // NaN payloads may differ; compare NaN-ness there and bits elsewhere.
  const auto finite_b = torch_bf16.isnan().logical_not(), finite_f = torch_f16.isnan().logical_not();
  EXPECT_TRUE(ours_bf16.isnan().equal(torch_bf16.isnan()));
  EXPECT_TRUE(ours_f16.isnan().equal(torch_f16.isnan()));
  expect_bitwise_equal(ours_bf16.masked_select(finite_b), torch_bf16.masked_select(finite_b), "bf16 -> f32");
  expect_bitwise_equal(ours_f16.masked_select(finite_f), torch_f16.masked_select(finite_f), "fp16 -> f32");
}

// --- thread pool --------------------------------------------------------------------------------

TEST(ThreadPool, ParallelForCoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(64), int64_t(1000), int64_t(100003)}) {
      for (int64_t grain : {int64_t(1), int64_t(16), int64_t(4096)}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<bool> misaligned{false};
        pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
          if (begin % grain != 0 || (end != n && (end - begin) % grain != 0)) misaligned = true;
          for (int64_t i = begin; i < end; ++i) hits[size_t(i)].fetch_add(1);
        });
        EXPECT_FALSE(misaligned) << threads << " threads, n=" << n << ", grain=" << grain;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[size_t(i)].load(), 1) << threads << " threads, n=" << n << ", grain=" << grain << ", i=" << i;
        }
      }
    }
  }
}

TEST(ThreadPool, ZeroThreadsMeansOnePerCore) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.num_threads(), int(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(ThreadPool, ManyBackToBackCallsAndNestedCalls) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int call = 0; call < 2000; ++call) {
    pool.parallel_for(64, 4, [&](int64_t begin, int64_t end) {
      // A nested call runs inline on this thread rather than deadlocking.
      pool.parallel_for(end - begin, 1, [&](int64_t b, int64_t e) { total += e - b; });
    });
  }
  EXPECT_EQ(total.load(), 2000 * 64);
}

TEST(ThreadPool, RethrowsAnExceptionFromAnyRange) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(1000, 10,
                                 [](int64_t begin, int64_t) {
                                   if (begin >= 500) throw std::runtime_error("range failed");
                                 }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> count{0};
  pool.parallel_for(1000, 10, [&](int64_t b, int64_t e) { count += e - b; });
  EXPECT_EQ(count.load(), 1000);
}

}  // namespace
}  // namespace ferry::kernels
