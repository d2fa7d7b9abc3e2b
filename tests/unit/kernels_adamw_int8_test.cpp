// CpuAdamW with 8-bit moments: the codes (every code round-trips, rounding is to nearest, the
// relative error bounds the header promises), the fp32 <-> int8 state conversions, every SIMD path
// and the threaded update against the scalar definition (bit for bit), one int8 step against the
// fp32 AdamW step on the dequantised moments (bit for bit), and a few hundred steps on a problem
// whose gradients span four decades inside every block against fp32 AdamW (adamw_update_reference),
// with a tolerance that linear and power-companded 8-bit states do not meet.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_int8.h"
#include "kernels/cpu/adamw_int8_internal.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

namespace detail = adamw_int8_detail;

std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
    if (cpu_supports(level)) levels.push_back(level);
  }
  return levels;
}

const char* name(GradType t) { return t == GradType::f32 ? "f32" : t == GradType::bf16 ? "bf16" : "f16"; }
const char* name(WeightOutType t) {
  return t == WeightOutType::none ? "none" : t == WeightOutType::bf16 ? "bf16" : "f16";
}

// One tensor's 8-bit moments in vectors, starting at m = v = 0.
struct Int8State {
  std::vector<int8_t> m;
  std::vector<float> m_scale;
  std::vector<uint8_t> s;
  std::vector<float> s_scale;
  explicit Int8State(int64_t n)
      : m(size_t(n)), m_scale(size_t(int8_moment_blocks(n))), s(size_t(n)), s_scale(size_t(int8_moment_blocks(n))) {}
  Int8Moments view() { return {m.data(), m_scale.data(), s.data(), s_scale.data()}; }
};

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  // memcmp must not see the null data() of an empty vector (UBSan: nonnull argument).
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// EXPECTs a and b equal byte for byte (NaNs included), naming the first differing element.
template <class T>
void expect_bitwise_equal(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  if (bitwise_equal(a, b)) return;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      ADD_FAILURE() << what << ": not bitwise equal; first difference at element " << i << " of " << a.size()
                    << ": " << double(a[i]) << " vs " << double(b[i]);
      return;
    }
  }
}

void expect_states_equal(const Int8State& a, const Int8State& b) {
  expect_bitwise_equal(a.m, b.m, "exp_avg codes");
  expect_bitwise_equal(a.m_scale, b.m_scale, "exp_avg scales");
  expect_bitwise_equal(a.s, b.s, "exp_avg_sq codes");
  expect_bitwise_equal(a.s_scale, b.s_scale, "exp_avg_sq scales");
}

// Values whose size spans `decades` decades at random positions, so every block holds both large
// and tiny ones (the case a linear code gets wrong). A few are exactly 0.
std::vector<float> spread_values(int64_t n, double decades, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<double> unit;
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& value : x) value = rng() % 61 == 0 ? 0.0f : normal(rng) * float(std::pow(10.0, -decades * unit(rng)));
  return x;
}

// The gradient in its wire type (bf16/fp16 rounded to nearest-even, as torch would send it).
std::vector<uint16_t> to_wire(const std::vector<float>& g, GradType type) {
  std::vector<uint16_t> out(g.size());
  for (size_t i = 0; i < g.size(); ++i) out[i] = type == GradType::bf16 ? float_to_bf16(g[i]) : float_to_fp16(g[i]);
  return out;
}

struct Gradients {
  GradType type;
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<uint16_t>> wire16;
  const void* step(int s) const {
    return type == GradType::f32 ? static_cast<const void*>(f32[size_t(s)].data()) : wire16[size_t(s)].data();
  }
};

Gradients gradients(int64_t n, GradType type, int steps, uint64_t seed) {
  Gradients g{type, {}, {}};
  for (int s = 0; s < steps; ++s) {
    // Four decades inside every block; scaled so fp16 keeps most of them above its subnormals.
    auto x = spread_values(n, 4.0, seed + uint64_t(s) * 7919);
    for (auto& value : x) value *= 8.0f;
    if (type == GradType::f32) {
      g.f32.push_back(std::move(x));
    } else {
      g.wire16.push_back(to_wire(x, type));
    }
  }
  return g;
}

std::vector<float> initial_master(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> p(static_cast<size_t>(n));
  for (auto& x : p) x = u(rng);
  return p;
}

// AdamW's defaults (lr 1e-3, betas 0.9 / 0.999, eps 1e-8) with this decay and step.
AdamWParams params_for(double weight_decay, int64_t step) { return {.weight_decay = weight_decay, .step = step}; }

struct Outcome {
  std::vector<float> master;
  Int8State state;
  std::vector<uint16_t> weight_out;
};

// Runs every step of `grads` at `level` (or the threaded adamw_update_int8 when level is empty).
Outcome run_int8(std::vector<float> master, Int8State state, const Gradients& grads, int steps, double wd,
             float grad_scale, WeightOutType out_type, std::optional<SimdLevel> level, ThreadPool* pool = nullptr) {
  const int64_t n = int64_t(master.size());
  std::vector<uint16_t> out(out_type == WeightOutType::none ? 0 : size_t(n));
  for (int step = 1; step <= steps; ++step) {
    const AdamWParams p = params_for(wd, step);
    void* out_ptr = out.empty() ? nullptr : out.data();
    if (level) {
      adamw_update_int8_at(*level, p, master.data(), state.view(), grads.step(step - 1), grads.type, grad_scale,
                           out_ptr, out_type, n);
    } else {
      adamw_update_int8(p, master.data(), state.view(), grads.step(step - 1), grads.type, grad_scale, out_ptr,
                        out_type, n, pool);
    }
  }
  return {std::move(master), std::move(state), std::move(out)};
}

// --- the codes ----------------------------------------------------------------------------------

TEST(AdamWInt8Codes, EveryCodeDecodesAndEncodesBackToItself) {
  float previous = -1.0f;
  for (int code = 0; code <= 127; ++code) {
    const float x = detail::decode_exp_avg(int8_t(code), 1.0f);
    EXPECT_GT(x, previous) << code;
    previous = x;
    EXPECT_EQ(detail::encode_exp_avg(x, 1.0f), code);
    EXPECT_EQ(detail::decode_exp_avg(int8_t(-code), 1.0f), -x);
    if (code > 0) {
      EXPECT_EQ(detail::encode_exp_avg(-x, 1.0f), -code);
    }
  }
  EXPECT_EQ(detail::decode_exp_avg(127, 1.0f), 1.0f);
  EXPECT_EQ(detail::decode_exp_avg(1, 1.0f), 0x1.4p-16f);
  previous = -1.0f;
  for (int code = 0; code <= 255; ++code) {
    const float x = detail::decode_exp_avg_sq_root(uint8_t(code), 1.0f);
    EXPECT_GT(x, previous) << code;
    previous = x;
    EXPECT_EQ(detail::encode_exp_avg_sq_root(x, 1.0f), code);
  }
  EXPECT_EQ(detail::decode_exp_avg_sq_root(255, 1.0f), 1.0f);
  EXPECT_EQ(detail::decode_exp_avg_sq_root(1, 1.0f), 0x1.2p-16f);
}

// x in [0, 1] goes to the nearest code value (the neighbours are no nearer), with the relative error
// the header states; tiny m goes to 0, tiny nonzero sqrt(v) to code 1, never 0.
TEST(AdamWInt8Codes, RoundToNearestWithinTheStatedRelativeError) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> unit;
  std::vector<float> xs;
  for (int i = 0; i < 400000; ++i) xs.push_back(float(std::pow(2.0, -20 * unit(rng))));
  for (int code = 1; code < 255; ++code) {  // midpoints between neighbouring codes, and next to them
    const float mid_s =
        0.5f * (detail::decode_exp_avg_sq_root(uint8_t(code), 1) + detail::decode_exp_avg_sq_root(uint8_t(code + 1), 1));
    xs.insert(xs.end(), {mid_s, std::nextafter(mid_s, 0.0f), std::nextafter(mid_s, 2.0f)});
    if (code < 127) {
      const float mid_m = 0.5f * (detail::decode_exp_avg(int8_t(code), 1) + detail::decode_exp_avg(int8_t(code + 1), 1));
      xs.insert(xs.end(), {mid_m, std::nextafter(mid_m, 0.0f), std::nextafter(mid_m, 2.0f)});
    }
  }
  xs.insert(xs.end(), {0.0f, 1.0f, 1e-30f, 0x1p-17f, 0x1.4p-17f, 0x1.3p-16f, std::nextafter(0x1.3p-16f, 0.0f)});
  for (float x : xs) {
    const int m = detail::encode_exp_avg(x, 1.0f);
    const double dm = std::abs(double(detail::decode_exp_avg(int8_t(m), 1)) - x);
    if (m > 0) {
      EXPECT_LE(dm, std::abs(double(detail::decode_exp_avg(int8_t(m - 1), 1)) - x)) << x;
    }
    if (m < 127) {
      EXPECT_LE(dm, std::abs(double(detail::decode_exp_avg(int8_t(m + 1), 1)) - x)) << x;
    }
    if (x >= 0x1.4p-16f) {
      EXPECT_LE(dm, x / 16.0) << x;
    }
    EXPECT_EQ(m == 0, x < 0x1.4p-17f) << x;  // half of code 1's value

    const int s = detail::encode_exp_avg_sq_root(x, 1.0f);
    const double ds = std::abs(double(detail::decode_exp_avg_sq_root(uint8_t(s), 1)) - x);
    if (s > 1) {
      EXPECT_LE(ds, std::abs(double(detail::decode_exp_avg_sq_root(uint8_t(s - 1), 1)) - x)) << x;
    }
    if (s < 255) {
      EXPECT_LE(ds, std::abs(double(detail::decode_exp_avg_sq_root(uint8_t(s + 1), 1)) - x)) << x;
    }
    if (x >= 0x1.2p-16f) {
      EXPECT_LE(ds, x / 32.0) << x;
    }
    EXPECT_EQ(s == 0, x == 0.0f) << x;
  }
}

// --- fp32 <-> int8 state ------------------------------------------------------------------------

TEST(AdamWInt8State, QuantizeDequantizeErrorBoundsAndIdempotence) {
  const int64_t n = 10 * kInt8MomentBlock + 77;  // a partial last block
  auto m = spread_values(n, 6.0, 1);
  auto v = spread_values(n, 6.0, 2);
  for (auto& x : v) x = x * x;  // v >= 0, spanning 12 decades (sqrt(v): 6, beyond the code's range)
  // One all-zero block and one block of values too small to hold (absmax below FLT_MIN).
  std::fill(m.begin() + 2 * kInt8MomentBlock, m.begin() + 3 * kInt8MomentBlock, 0.0f);
  std::fill(v.begin() + 2 * kInt8MomentBlock, v.begin() + 3 * kInt8MomentBlock, 0.0f);
  std::fill(m.begin() + 3 * kInt8MomentBlock, m.begin() + 4 * kInt8MomentBlock, 1e-39f);
  Int8State q(n);
  quantize_int8_moments(m.data(), v.data(), q.view(), n);
  std::vector<float> m2(static_cast<size_t>(n)), v2(static_cast<size_t>(n));
  dequantize_int8_moments(q.view(), m2.data(), v2.data(), n);

  int64_t checked_m = 0, checked_v = 0;
  for (int64_t b = 0; b < int8_moment_blocks(n); ++b) {
    const int64_t begin = b * kInt8MomentBlock, end = std::min(n, begin + kInt8MomentBlock);
    float absmax_m = 0, absmax_s = 0;
    for (int64_t i = begin; i < end; ++i) {
      absmax_m = std::max(absmax_m, std::abs(m[size_t(i)]));
      absmax_s = std::max(absmax_s, std::sqrt(v[size_t(i)]));
    }
    EXPECT_EQ(q.m_scale[size_t(b)], absmax_m >= 0x1p-126f ? absmax_m : 0.0f) << "block " << b;
    EXPECT_EQ(q.s_scale[size_t(b)], absmax_s >= 0x1p-126f ? absmax_s : 0.0f) << "block " << b;
    if (absmax_m < 0x1p-126f) continue;  // the blocks stored as zeros, checked below
    for (int64_t i = begin; i < end; ++i) {
      const double mi = m[size_t(i)], si = std::sqrt(double(v[size_t(i)]));
      const double m_err = std::abs(m2[size_t(i)] - mi), s_err = std::abs(std::sqrt(double(v2[size_t(i)])) - si);
      // Relative bounds (plus the few ulps of the scale multiply and of v = s*s) where the code has
      // its full precision, half the smallest code below that.
      if (std::abs(mi) >= 0x1.4p-16 * absmax_m) {
        EXPECT_LE(m_err, std::abs(mi) * (1.0 / 16 + 1e-6)) << "m " << i;
        ++checked_m;
      } else {  // 0 or code 1
        EXPECT_LE(m_err, 0x1.4p-17 * absmax_m * (1 + 1e-6)) << "m " << i;
      }
      if (si >= 0x1.2p-16 * absmax_s) {
        EXPECT_LE(s_err, si * (1.0 / 32 + 1e-6)) << "sqrt(v) " << i;
        ++checked_v;
      } else if (absmax_s >= 0x1p-126f) {
        EXPECT_LE(v2[size_t(i)], (0x1.2p-16 * absmax_s) * (0x1.2p-16 * absmax_s) * (1 + 1e-6)) << "v " << i;
        EXPECT_EQ(v2[size_t(i)] == 0.0f, v[size_t(i)] == 0.0f) << "a nonzero v must not become 0: " << i;
      }
    }
  }
  // Most elements are within the codes' 16 binades of their block's absmax (6 decades drawn, 4.8 held).
  EXPECT_GT(checked_m, n / 2);
  EXPECT_GT(checked_v, n / 2);
  // The all-zero block stays exactly zero; the block below FLT_MIN is stored as zeros.
  for (int64_t i = 2 * kInt8MomentBlock; i < 4 * kInt8MomentBlock; ++i) {
    ASSERT_EQ(m2[size_t(i)], 0.0f) << i;
  }

  // Dequantised moments quantise back to the same state (a checkpoint round trip changes nothing).
  Int8State q2(n);
  quantize_int8_moments(m2.data(), v2.data(), q2.view(), n);
  expect_states_equal(q2, q);
}

TEST(AdamWInt8State, ZeroIsZero) {
  const int64_t n = 3 * kInt8MomentBlock + 5;
  Int8State q(n);
  std::fill(q.m.begin(), q.m.end(), int8_t(5));
  std::fill(q.s.begin(), q.s.end(), uint8_t(9));
  std::fill(q.m_scale.begin(), q.m_scale.end(), 2.0f);
  std::fill(q.s_scale.begin(), q.s_scale.end(), 3.0f);
  zero_int8_moments(q.view(), n);
  std::vector<float> m(size_t(n), 1.0f), v(size_t(n), 1.0f);
  dequantize_int8_moments(q.view(), m.data(), v.data(), n);
  EXPECT_EQ(std::count(m.begin(), m.end(), 0.0f), n);
  EXPECT_EQ(std::count(v.begin(), v.end(), 0.0f), n);
  EXPECT_EQ(int8_moment_bytes(n), 2 * n + 8 * 4);
  EXPECT_EQ(int8_moment_blocks(256), 1);
  EXPECT_EQ(int8_moment_blocks(257), 2);
}

// --- every SIMD path against the definition, bit for bit ----------------------------------------

TEST(AdamWInt8, EveryPathMatchesTheReferenceBitForBit) {
  constexpr int kSteps = 5;
  const int64_t sizes[] = {1, 7, 8, 9, 31, 32, 33, 255, 256, 257, 1000, 3 * 4096 + 17};
  for (GradType grad_type : {GradType::f32, GradType::bf16, GradType::f16}) {
    for (int64_t n : sizes) {
      const auto master = initial_master(n, uint64_t(n) * 31 + 7);
      const auto grads = gradients(n, grad_type, kSteps, uint64_t(n));
      for (WeightOutType out_type : {WeightOutType::none, WeightOutType::bf16, WeightOutType::f16}) {
        for (double wd : {0.0, 0.1}) {
          for (float grad_scale : {1.0f, 0.37f}) {
            const std::string config = std::string("grad=") + name(grad_type) + " out=" + name(out_type) +
                                       " n=" + std::to_string(n) + " wd=" + std::to_string(wd) +
                                       " scale=" + std::to_string(grad_scale);
            const Outcome ref = run_int8(master, Int8State(n), grads, kSteps, wd, grad_scale, out_type, SimdLevel::scalar);
            for (SimdLevel level : supported_levels()) {
              if (level == SimdLevel::scalar) continue;
              SCOPED_TRACE(std::string(simd_level_name(level)) + " " + config);
              const Outcome fast = run_int8(master, Int8State(n), grads, kSteps, wd, grad_scale, out_type, level);
              expect_bitwise_equal(fast.master, ref.master, "master");
              expect_states_equal(fast.state, ref.state);
              expect_bitwise_equal(fast.weight_out, ref.weight_out, "weight_out");
            }
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST(AdamWInt8, EveryPathMatchesTheReferenceOnALargeChunk) {
  const int64_t n = 1'000'003;
  const auto master = initial_master(n, 3);
  for (GradType grad_type : {GradType::f32, GradType::bf16}) {
    const auto grads = gradients(n, grad_type, 3, 4);
    const Outcome ref = run_int8(master, Int8State(n), grads, 3, 0.1, 0.37f, WeightOutType::bf16, SimdLevel::scalar);
    for (SimdLevel level : supported_levels()) {
      if (level == SimdLevel::scalar) continue;
      SCOPED_TRACE(std::string(simd_level_name(level)) + " grad=" + name(grad_type));
      const Outcome fast = run_int8(master, Int8State(n), grads, 3, 0.1, 0.37f, WeightOutType::bf16, level);
      expect_bitwise_equal(fast.master, ref.master, "master");
      expect_states_equal(fast.state, ref.state);
      expect_bitwise_equal(fast.weight_out, ref.weight_out, "weight_out");
    }
  }
}

// Infinite and NaN gradients (a step the trainer should have skipped) make the same master weights
// NaN on every path and leave every other value bit for bit the same. Only NaN signs and payloads may
// differ: where two different NaNs meet, x86 returns the operand the compiler happened to put first.
TEST(AdamWInt8, NonFiniteGradientsPoisonTheSameParametersOnEveryPath) {
  const int64_t n = 3 * kInt8MomentBlock + 13;
  const auto master = initial_master(n, 8);
  auto grads = gradients(n, GradType::f32, 3, 9);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  grads.f32[1][5] = inf;
  grads.f32[1][300] = -inf;
  grads.f32[1][301] = nan;
  grads.f32[1][511] = nan;  // in the last vector of a block, where a NaN could reach the block's absmax
  grads.f32[2][3 * kInt8MomentBlock + 7] = nan;
  grads.f32[2][n - 1] = nan;  // in the scalar tail
  const Outcome ref = run_int8(master, Int8State(n), grads, 3, 0.1, 1.0f, WeightOutType::bf16, SimdLevel::scalar);
  for (SimdLevel level : supported_levels()) {
    if (level == SimdLevel::scalar) continue;
    SCOPED_TRACE(simd_level_name(level));
    const Outcome fast = run_int8(master, Int8State(n), grads, 3, 0.1, 1.0f, WeightOutType::bf16, level);
    int64_t poisoned = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float a = fast.master[size_t(i)], b = ref.master[size_t(i)];
      if (std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a)) << "master " << i;
        ++poisoned;
        continue;
      }
      EXPECT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)) << "master " << i;
      EXPECT_EQ(fast.state.m[size_t(i)], ref.state.m[size_t(i)]) << "exp_avg code " << i;
      EXPECT_EQ(fast.state.s[size_t(i)], ref.state.s[size_t(i)]) << "exp_avg_sq code " << i;
    }
    EXPECT_GT(poisoned, 0);
    expect_bitwise_equal(fast.state.m_scale, ref.state.m_scale, "exp_avg scales");
    expect_bitwise_equal(fast.state.s_scale, ref.state.s_scale, "exp_avg_sq scales");
    expect_bitwise_equal(fast.weight_out, ref.weight_out, "weight_out");  // bf16 NaN is canonical
  }
}

TEST(AdamWInt8, ThreadedUpdateMatchesTheReference) {
  const int64_t n = 3'000'017;  // several ranges per thread, plus a partial last block
  const auto master = initial_master(n, 5);
  for (GradType grad_type : {GradType::f32, GradType::bf16}) {
    const auto grads = gradients(n, grad_type, 2, 6);
    const Outcome ref = run_int8(master, Int8State(n), grads, 2, 0.1, 1.0f, WeightOutType::bf16, SimdLevel::scalar);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, grad " + name(grad_type));
      ThreadPool pool(threads);
      const Outcome fast = run_int8(master, Int8State(n), grads, 2, 0.1, 1.0f, WeightOutType::bf16, std::nullopt, &pool);
      expect_bitwise_equal(fast.master, ref.master, "master");
      expect_states_equal(fast.state, ref.state);
      expect_bitwise_equal(fast.weight_out, ref.weight_out, "weight_out");
    }
  }
}

// --- the step is fp32 AdamW's on the dequantised moments ----------------------------------------

// One int8 step = dequantize -> adamw_update_reference (the fp32 definition) -> quantize, bit for
// bit, at every step of a run, for every path. From m = v = 0 the first step's master weights are
// therefore exactly fp32 AdamW's.
TEST(AdamWInt8, EachStepIsTheFp32StepOnTheDequantisedMoments) {
  const int64_t n = 5 * kInt8MomentBlock + 100;
  auto master = initial_master(n, 10);
  const auto grads = gradients(n, GradType::bf16, 6, 11);
  for (SimdLevel level : supported_levels()) {
    SCOPED_TRACE(simd_level_name(level));
    std::vector<float> p_int8 = master;
    Int8State q(n);
    for (int step = 1; step <= 6; ++step) {
      const AdamWParams params = params_for(0.1, step);
      std::vector<float> p_fp32 = p_int8, m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
      dequantize_int8_moments(q.view(), m.data(), v.data(), n);
      std::vector<uint16_t> out_fp32(static_cast<size_t>(n)), out_int8(static_cast<size_t>(n));
      adamw_update_reference(params, p_fp32.data(), m.data(), v.data(), grads.step(step - 1), GradType::bf16, 0.5f,
                             out_fp32.data(), WeightOutType::f16, n);
      Int8State expected(n);
      quantize_int8_moments(m.data(), v.data(), expected.view(), n);
      adamw_update_int8_at(level, params, p_int8.data(), q.view(), grads.step(step - 1), GradType::bf16, 0.5f,
                           out_int8.data(), WeightOutType::f16, n);
      SCOPED_TRACE("step " + std::to_string(step));
      expect_bitwise_equal(p_int8, p_fp32, "master");
      expect_bitwise_equal(out_int8, out_fp32, "weight_out");
      expect_states_equal(q, expected);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// --- a few hundred steps against fp32 AdamW -----------------------------------------------------

// A noisy separable quadratic: loss_i = h_i/2 * (w_i - target_i)^2 with curvatures h_i spread over
// four decades at random inside every block, gradient h_i * (w_i - target_i + noise). AdamW is
// invariant to each coordinate's scale (eps aside), so in fp32 every coordinate converges alike;
// an 8-bit state must keep the small-gradient coordinates of a block as accurate as its large ones.
struct Quadratic {
  int64_t n;
  std::vector<float> curvature, target, noise_scale;
  uint64_t seed;

  explicit Quadratic(int64_t size) : n(size), curvature(size_t(size)), target(size_t(size)), seed(77) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit;
    for (int64_t i = 0; i < n; ++i) {
      curvature[size_t(i)] = float(std::pow(10.0, -4.0 * unit(rng)));
      target[size_t(i)] = float(2 * unit(rng) - 1);
    }
  }
  // The gradient at w for `step` (the same noise for every optimizer).
  std::vector<float> gradient(const std::vector<float>& w, int step) const {
    std::mt19937_64 rng(seed * 1000003 + uint64_t(step));
    std::normal_distribution<float> normal;
    std::vector<float> g(static_cast<size_t>(n));
    for (size_t i = 0; i < g.size(); ++i) g[i] = curvature[i] * (w[i] - target[i] + 0.3f * normal(rng));
    return g;
  }
  // Mean squared distance to the targets: scale-free, so every coordinate counts alike.
  double distance(const std::vector<float>& w) const {
    double sum = 0;
    for (size_t i = 0; i < w.size(); ++i) sum += std::pow(double(w[i]) - target[i], 2);
    return sum / double(n);
  }
};

AdamWParams training_params(int64_t step) {
  AdamWParams p;
  p.lr = 1e-2;
  p.weight_decay = 0.0;
  p.step = step;
  return p;
}

// The 8-bit schemes the header rejects, simulated as plain loops (dequantise, fp32 AdamW step,
// requantise per block against the new absmax, round to nearest), to show that the tolerance below
// tells a good state from a bad one:
//   linear: m = q/127 * absmax, v = q/255 * absmax (bitsandbytes' failure case for v);
//   power:  companding, m = sign * (q/127)^2 * absmax, v = (q/255)^4 * absmax.
enum class Scheme { linear, power };

float requantize(float x, float absmax, bool is_v, Scheme scheme) {
  if (absmax == 0) return 0;
  const float levels = is_v ? 255.0f : 127.0f;
  const float r = std::abs(x) / absmax;
  float y;
  if (scheme == Scheme::linear) {
    y = std::nearbyint(levels * r) / levels;
  } else {
    const float q = std::nearbyint(levels * (is_v ? std::sqrt(std::sqrt(r)) : std::sqrt(r))) / levels;
    y = is_v ? q * q * q * q : q * q;
  }
  return std::copysign(y * absmax, x);
}

// One step with the moments m, v held at the precision of `scheme` (kept dequantised between steps).
void alternative_int8_step(const AdamWParams& params, Scheme scheme, std::vector<float>& w, std::vector<float>& m,
                           std::vector<float>& v, const std::vector<float>& g) {
  const int64_t n = int64_t(w.size());
  adamw_update_reference(params, w.data(), m.data(), v.data(), g.data(), GradType::f32, 1.0f, nullptr,
                         WeightOutType::none, n);
  for (int64_t begin = 0; begin < n; begin += kInt8MomentBlock) {
    const int64_t end = std::min(n, begin + kInt8MomentBlock);
    float absmax_m = 0, absmax_v = 0;
    for (int64_t i = begin; i < end; ++i) {
      absmax_m = std::max(absmax_m, std::abs(m[size_t(i)]));
      absmax_v = std::max(absmax_v, v[size_t(i)]);
    }
    for (int64_t i = begin; i < end; ++i) {
      m[size_t(i)] = requantize(m[size_t(i)], absmax_m, false, scheme);
      v[size_t(i)] = requantize(v[size_t(i)], absmax_v, true, scheme);
    }
  }
}

// How far one run strays from fp32 AdamW's.
struct Deviation {
  std::vector<float> w;
  double max_abs = 0;    // max over coordinates and steps of |w - w_fp32|
  double rms_final = 0;  // RMS over coordinates of w - w_fp32 after the last step
  double distance_final = 0;

  void track(const std::vector<float>& w_fp32) {
    for (size_t i = 0; i < w.size(); ++i) {
      const double d = std::abs(double(w[i]) - w_fp32[i]);
      max_abs = std::max(max_abs, std::isfinite(d) ? d : 1e30);
    }
  }
  void finish(const std::vector<float>& w_fp32, const Quadratic& problem) {
    for (size_t i = 0; i < w.size(); ++i) rms_final += std::pow(double(w[i]) - w_fp32[i], 2);
    rms_final = std::sqrt(rms_final / double(w.size()));
    distance_final = problem.distance(w);
  }
};

// The bounds int8 AdamW meets on the quadratic and the alternatives do not. Measured (300 steps,
// seeds 77, 1, 2 of this problem): max |w - w_fp32| 0.087-0.113, final RMS 0.0062-0.0069, final
// distance 1.16-1.19x fp32's (the rounding freezes each v relative to its block's absmax once its
// per-step change falls below a code step; the cost grows slowly with the run: 1.07x at 150 steps,
// 1.27x at 600). Power companding: 1.7, 0.029, 1.8x; linear: diverges. The targets are O(1), the
// step 1e-2.
constexpr int kTrainingSteps = 300;
constexpr double kMaxDeviation = 0.2;
constexpr double kRmsDeviation = 0.012;
constexpr double kDistanceRatio = 1.3;

bool meets_bounds(const Deviation& d, double fp32_distance) {
  return d.max_abs <= kMaxDeviation && d.rms_final <= kRmsDeviation &&
         d.distance_final <= kDistanceRatio * fp32_distance;
}

TEST(AdamWInt8Training, TracksFp32AdamWAcrossFourDecadesOfGradientScale) {
  const Quadratic problem(16 * kInt8MomentBlock);
  const int64_t n = problem.n;
  std::vector<float> w_fp32(size_t(n), 0.0f), m(size_t(n), 0.0f), v(size_t(n), 0.0f);
  Int8State q(n);
  Deviation int8{w_fp32}, linear{w_fp32}, power{w_fp32};
  std::vector<float> linear_m = m, linear_v = v, power_m = m, power_v = v;
  const double start_distance = problem.distance(w_fp32);
  for (int step = 1; step <= kTrainingSteps; ++step) {
    const AdamWParams params = training_params(step);
    const auto g_fp32 = problem.gradient(w_fp32, step);
    adamw_update_reference(params, w_fp32.data(), m.data(), v.data(), g_fp32.data(), GradType::f32, 1.0f, nullptr,
                           WeightOutType::none, n);
    const auto g_int8 = problem.gradient(int8.w, step);
    adamw_update_int8(params, int8.w.data(), q.view(), g_int8.data(), GradType::f32, 1.0f, nullptr,
                      WeightOutType::none, n);
    alternative_int8_step(params, Scheme::linear, linear.w, linear_m, linear_v, problem.gradient(linear.w, step));
    alternative_int8_step(params, Scheme::power, power.w, power_m, power_v, problem.gradient(power.w, step));
    for (Deviation* d : {&int8, &linear, &power}) d->track(w_fp32);
  }
  const double fp32_distance = problem.distance(w_fp32);
  for (Deviation* d : {&int8, &linear, &power}) d->finish(w_fp32, problem);
  std::printf("    %d steps, %lld params, gradient scales over 4 decades in every block; mean squared distance to "
              "the targets: start %.4f, fp32 AdamW %.5f\n", kTrainingSteps, (long long)n, start_distance, fp32_distance);
  const std::pair<const char*, const Deviation*> runs[] = {{"int8 (this kernel)", &int8}, {"power companding", &power},
                                                            {"linear absmax", &linear}};
  for (const auto& [what, d] : runs) {
    std::printf("    %-19s max |w - w_fp32| %.4g, final RMS %.4g, distance %.4g (%.3gx fp32)\n", what, d->max_abs,
                d->rms_final, d->distance_final, d->distance_final / fp32_distance);
  }
  // fp32 AdamW itself must have converged, or the comparison says nothing.
  ASSERT_LT(fp32_distance, 0.1 * start_distance);

  EXPECT_LE(int8.max_abs, kMaxDeviation);
  EXPECT_LE(int8.rms_final, kRmsDeviation);
  EXPECT_LE(int8.distance_final, kDistanceRatio * fp32_distance);
  // The bounds have teeth: the rejected schemes do not meet them.
  EXPECT_FALSE(meets_bounds(linear, fp32_distance)) << "a linear int8 state should not meet the bounds";
  EXPECT_FALSE(meets_bounds(power, fp32_distance)) << "a power-companded int8 state should not meet the bounds";
}

// --- arguments -------------------------------------------------------------------------------------

TEST(AdamWInt8, RejectsBadArguments) {
  float x = 0, scale = 0;
  int8_t m = 0;
  uint8_t s = 0;
  uint16_t h = 0;
  const Int8Moments q{&m, &scale, &s, &scale};
  EXPECT_THROW(adamw_update_int8(params_for(0, 0), &x, q, &x, GradType::f32, 1, nullptr, WeightOutType::none, 1),
               InternalError);  // step is 1-based
  EXPECT_THROW(adamw_update_int8(params_for(0, 1), &x, q, &x, GradType::f32, 1, nullptr, WeightOutType::bf16, 1),
               InternalError);  // output type without a buffer
  EXPECT_THROW(adamw_update_int8(params_for(0, 1), &x, q, &x, GradType::f32, 1, &h, WeightOutType::none, 1),
               InternalError);  // buffer without an output type
  EXPECT_THROW(adamw_update_int8(params_for(0, 1), &x, Int8Moments{}, &x, GradType::f32, 1, nullptr,
                                 WeightOutType::none, 1),
               InternalError);  // no moments
  EXPECT_NO_THROW(adamw_update_int8(params_for(0, 1), nullptr, Int8Moments{}, nullptr, GradType::f32, 1, nullptr,
                                    WeightOutType::none, 0));
}

}  // namespace
}  // namespace ferry::kernels
