// bf16 weights with stochastic rounding around CpuAdamW (kernels/cpu/adamw_stochastic.h):
// rounding is unbiased (the mean of many roundings of a value between two bf16 neighbours is the
// value, within the binomial bound) and only ever picks one of the two neighbours; NaN and
// infinities are kept; the random bits depend on (seed, step, index) alone, so the tiled,
// threaded update equals the definition bit for bit with fp32 and int8 moments whatever the pool,
// and a different seed or step rounds differently; over many steps far below a bf16 ulp the
// weights follow fp32-master AdamW on average, where round-to-nearest bf16 loses every update.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_int8.h"
#include "kernels/cpu/adamw_stochastic.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/support/random_floats.h"

namespace ferry::kernels {
namespace {

using test_support::random_floats;

TEST(AdamWStochastic, RoundingIsUnbiasedAndPicksANeighbour) {
  const int draws = 200000;
  for (const float x : {1.0f + 0.3f / 128, -3.0f - 0.71f * 0.015625f, 1e-3f * 1.0001f, -7.77e-30f, 1.0f + 1.0f / 256}) {
    const uint16_t down = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);  // toward zero
    const float low = bf16_to_float(down), high = bf16_to_float(static_cast<uint16_t>(down + 1));
    double sum = 0;
    for (int i = 0; i < draws; ++i) {
      const uint16_t r = stochastic_rounding_bits(7, 3, i);
      const uint16_t y = stochastic_bf16(x, r);
      ASSERT_TRUE(y == down || y == static_cast<uint16_t>(down + 1)) << x;
      sum += bf16_to_float(y);
    }
    const double mean = sum / draws;
    const double p = (double(x) - low) / (double(high) - low);  // the chance of rounding away from zero
    const double bound = 5 * std::abs(double(high) - low) * std::sqrt(p * (1 - p) / draws) + 1e-12 * std::abs(x);
    EXPECT_NEAR(mean, double(x), bound) << "x " << x << ", p " << p;
  }
  // Exact bf16 values stay; NaN and infinities are kept.
  EXPECT_EQ(stochastic_bf16(1.5f, 0xffff), float_to_bf16(1.5f));
  EXPECT_EQ(stochastic_bf16(std::numeric_limits<float>::infinity(), 0xffff),
            float_to_bf16(std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(std::isnan(bf16_to_float(stochastic_bf16(std::numeric_limits<float>::quiet_NaN(), 0x1234))));
}

struct Problem {
  std::vector<uint16_t> weight;
  std::vector<float> exp_avg, exp_avg_sq, grad;
};

Problem make_problem(int64_t n) {
  Problem p;
  const std::vector<float> w = random_floats(n, 1.0f, 11);
  for (float x : w) p.weight.push_back(float_to_bf16(x));
  p.exp_avg = random_floats(n, 0.01f, 12);
  p.exp_avg_sq = random_floats(n, 0.01f, 13);
  for (float& v : p.exp_avg_sq) v = v * v;
  p.grad = random_floats(n, 0.1f, 14);
  return p;
}

TEST(AdamWStochastic, ThreadedUpdateEqualsTheDefinitionAndDependsOnSeedAndStep) {
  AdamWParams params;
  params.lr = 1e-3;
  params.step = 5;
  const int64_t n = 40 * kStochasticTile + 777;  // threaded, with a partial tile and a partial int8 block
  ThreadPool two(2), three(3);
  Problem a = make_problem(n), b = make_problem(n), c = make_problem(n);
  adamw_update_stochastic(params, a.weight.data(), a.exp_avg.data(), a.exp_avg_sq.data(), a.grad.data(),
                          GradType::f32, 1.0f, n, 42, 1000, &two);
  adamw_update_stochastic(params, b.weight.data(), b.exp_avg.data(), b.exp_avg_sq.data(), b.grad.data(),
                          GradType::f32, 1.0f, n, 42, 1000, &three);
  adamw_update_stochastic_reference(params, c.weight.data(), c.exp_avg.data(), c.exp_avg_sq.data(), nullptr,
                                    c.grad.data(), GradType::f32, 1.0f, n, 42, 1000);
  EXPECT_EQ(a.weight, c.weight);
  EXPECT_EQ(b.weight, c.weight);
  EXPECT_EQ(a.exp_avg, c.exp_avg);
  // Another seed, step or offset into the buffer draws other bits.
  for (const auto& [seed, step, first] : std::vector<std::tuple<uint64_t, int64_t, int64_t>>{{43, 5, 1000}, {42, 6, 1000}, {42, 5, 0}}) {
    Problem d = make_problem(n);
    AdamWParams other = params;
    other.step = step;
    adamw_update_stochastic(other, d.weight.data(), d.exp_avg.data(), d.exp_avg_sq.data(), d.grad.data(),
                            GradType::f32, 1.0f, n, seed, first, &two);
    EXPECT_NE(d.weight, c.weight) << seed << " " << step << " " << first;
  }

  // int8 moments and bf16 gradients.
  const int64_t blocks = int8_moment_blocks(n);
  struct State {
    std::vector<int8_t> m;
    std::vector<float> m_scale;
    std::vector<uint8_t> s;
    std::vector<float> s_scale;
    Int8Moments view() { return {m.data(), m_scale.data(), s.data(), s_scale.data()}; }
  };
  Problem p = make_problem(n), q = make_problem(n);
  State x{std::vector<int8_t>(n), std::vector<float>(blocks), std::vector<uint8_t>(n), std::vector<float>(blocks)};
  State y = x;
  quantize_int8_moments(p.exp_avg.data(), p.exp_avg_sq.data(), x.view(), n);
  quantize_int8_moments(q.exp_avg.data(), q.exp_avg_sq.data(), y.view(), n);
  std::vector<uint16_t> grad(n);
  for (int64_t i = 0; i < n; ++i) grad[i] = float_to_bf16(p.grad[i]);
  adamw_update_stochastic_int8(params, p.weight.data(), x.view(), grad.data(), GradType::bf16, 1.0f, n, 9, 0, &two);
  const Int8Moments y_view = y.view();
  adamw_update_stochastic_reference(params, q.weight.data(), nullptr, nullptr, &y_view, grad.data(), GradType::bf16,
                                    1.0f, n, 9, 0);
  EXPECT_EQ(p.weight, q.weight);
  EXPECT_EQ(x.m, y.m);
}

TEST(AdamWStochastic, FollowsFp32MasterOnAverageWhereRoundToNearestStalls) {
  // Weights near 1 (bf16 ulp 2^-7 = 0.0078) and lr 1e-4: each step moves a weight by about 1e-4,
  // far below half an ulp, so round-to-nearest bf16 never moves; stochastic rounding moves it by the
  // right amount on average. Compared as the mean over 4096 weights of the distance moved.
  const int64_t n = 4096;
  std::vector<float> start(n, 1.0f), fp32 = start;
  std::vector<uint16_t> stochastic(n, float_to_bf16(1.0f)), nearest(n, float_to_bf16(1.0f));
  std::vector<float> m1(n, 0), v1(n, 0), m2(n, 0), v2(n, 0), m3(n, 0), v3(n, 0), grad(n, 1.0f);
  std::vector<float> master(n);
  for (int64_t step = 1; step <= 300; ++step) {
    AdamWParams params;
    params.lr = 1e-4;
    params.weight_decay = 0;
    params.step = step;
    adamw_update_reference(params, fp32.data(), m1.data(), v1.data(), grad.data(), GradType::f32, 1.0f, nullptr,
                           WeightOutType::none, n);
    adamw_update_stochastic(params, stochastic.data(), m2.data(), v2.data(), grad.data(), GradType::f32, 1.0f, n, 1);
    for (int64_t i = 0; i < n; ++i) master[i] = bf16_to_float(nearest[i]);
    adamw_update_reference(params, master.data(), m3.data(), v3.data(), grad.data(), GradType::f32, 1.0f, nullptr,
                           WeightOutType::none, n);
    for (int64_t i = 0; i < n; ++i) nearest[i] = float_to_bf16(master[i]);
  }
  double fp32_moved = 0, stochastic_moved = 0, nearest_moved = 0;
  for (int64_t i = 0; i < n; ++i) {
    fp32_moved += double(start[i] - fp32[i]) / n;
    stochastic_moved += double(start[i] - bf16_to_float(stochastic[i])) / n;
    nearest_moved += double(start[i] - bf16_to_float(nearest[i])) / n;
  }
  std::printf("moved: fp32 %.5f, stochastic bf16 %.5f, round-to-nearest bf16 %.5f\n", fp32_moved, stochastic_moved,
              nearest_moved);
  EXPECT_GT(fp32_moved, 0.025);                                  // ~300 x 1e-4
  EXPECT_NEAR(stochastic_moved, fp32_moved, 0.02 * fp32_moved);  // unbiased: the mean follows
  EXPECT_LT(nearest_moved, 0.1 * fp32_moved);                    // rounds every update away
}

}  // namespace
}  // namespace ferry::kernels
