// CpuAdamW on bf16 + Kahan master weights: the (weight, compensation) pair round-trips an fp32
// master to ~16 significant bits and its value is a fixed point of encode/decode; the tiled, threaded update
// equals the definition (decode all, reference AdamW, encode) bit for bit, with fp32 and int8
// moments; and over many small steps it follows fp32-master AdamW where plain bf16 master weights
// lose the updates to rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_int8.h"
#include "kernels/cpu/adamw_kahan.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/support/max_difference.h"
#include "tests/support/random_floats.h"

namespace ferry::kernels {
namespace {

using test_support::random_floats;

TEST(AdamWKahan, ThePairHoldsSixteenSignificantBitsAndIsAFixedPoint) {
  const int64_t n = 100000;
  const std::vector<float> master = random_floats(n, 1.0f, 1);
  std::vector<uint16_t> w(n), c(n);
  encode_kahan_master(master.data(), w.data(), c.data(), n);
  std::vector<float> decoded(n);
  decode_kahan_master(w.data(), c.data(), decoded.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(w[i], float_to_bf16(master[i]));  // the weight is the master rounded to bf16
  }
  const double worst = test_support::max_relative_difference(decoded, master);  // NaN if any is not finite
  EXPECT_LE(worst, std::ldexp(1.0, -16));
  EXPECT_GT(worst, 0.0);  // fp32 has 24 bits: the pair cannot hold them all
  // Re-encoding a decoded master gives a pair with the same value (the pair itself may differ
  // where the value sits exactly halfway between two bf16 numbers: w rounds to even, c flips sign).
  std::vector<uint16_t> w2(n), c2(n);
  encode_kahan_master(decoded.data(), w2.data(), c2.data(), n);
  std::vector<float> again(n);
  decode_kahan_master(w2.data(), c2.data(), again.data(), n);
  EXPECT_EQ(again, decoded);
}

struct Problem {
  std::vector<uint16_t> weight, compensation;
  std::vector<float> exp_avg, exp_avg_sq, grad;
};

Problem make_problem(int64_t n) {
  Problem p;
  const std::vector<float> master = random_floats(n, 0.5f, 2);
  p.weight.resize(n);
  p.compensation.resize(n);
  encode_kahan_master(master.data(), p.weight.data(), p.compensation.data(), n);
  p.exp_avg = random_floats(n, 1e-3f, 3);
  p.exp_avg_sq = random_floats(n, 1e-3f, 4);
  for (float& v : p.exp_avg_sq) v = v * v;
  p.grad = random_floats(n, 1e-2f, 5);
  return p;
}

TEST(AdamWKahan, TheThreadedUpdateEqualsTheDefinitionBitForBit) {
  ThreadPool pool(2);
  AdamWParams params;
  params.lr = 1e-3;
  params.weight_decay = 0.1;
  params.step = 3;
  const int64_t n = 40 * kKahanTile + 777;  // threaded, with a partial tile and a partial int8 block
  Problem threaded = make_problem(n), reference = make_problem(n);
  adamw_update_kahan(params, threaded.weight.data(), threaded.compensation.data(), threaded.exp_avg.data(),
                     threaded.exp_avg_sq.data(), threaded.grad.data(), GradType::f32, 0.5f, n, &pool);
  adamw_update_kahan_reference(params, reference.weight.data(), reference.compensation.data(),
                               reference.exp_avg.data(), reference.exp_avg_sq.data(), nullptr, reference.grad.data(),
                               GradType::f32, 0.5f, n);
  EXPECT_EQ(threaded.weight, reference.weight);
  EXPECT_EQ(threaded.compensation, reference.compensation);
  EXPECT_EQ(threaded.exp_avg, reference.exp_avg);
  EXPECT_EQ(threaded.exp_avg_sq, reference.exp_avg_sq);
  EXPECT_NE(threaded.weight, make_problem(n).weight);  // the step moved the weights

  // int8 moments and bf16 gradients.
  const int64_t blocks = int8_moment_blocks(n);
  struct State {
    std::vector<int8_t> m;
    std::vector<float> m_scale;
    std::vector<uint8_t> s;
    std::vector<float> s_scale;
    Int8Moments view() { return {m.data(), m_scale.data(), s.data(), s_scale.data()}; }
  };
  State a{std::vector<int8_t>(n), std::vector<float>(blocks), std::vector<uint8_t>(n), std::vector<float>(blocks)};
  Problem p = make_problem(n);
  quantize_int8_moments(p.exp_avg.data(), p.exp_avg_sq.data(), a.view(), n);
  State b = a;
  std::vector<uint16_t> grad(n);
  for (int64_t i = 0; i < n; ++i) grad[i] = float_to_bf16(p.grad[i]);
  Problem q = p;
  adamw_update_kahan_int8(params, p.weight.data(), p.compensation.data(), a.view(), grad.data(), GradType::bf16,
                          1.0f, n, &pool);
  const Int8Moments b_view = b.view();
  adamw_update_kahan_reference(params, q.weight.data(), q.compensation.data(), nullptr, nullptr, &b_view,
                               grad.data(), GradType::bf16, 1.0f, n);
  EXPECT_EQ(p.weight, q.weight);
  EXPECT_EQ(p.compensation, q.compensation);
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.s, b.s);
  EXPECT_EQ(a.m_scale, b.m_scale);
  EXPECT_EQ(a.s_scale, b.s_scale);
}

TEST(AdamWKahan, ManySmallStepsFollowFp32MasterWherePlainBf16StallsOrDrifts) {
  // Weights near 1 (bf16 ulp 2^-7 = 0.0078) and lr 1e-4: each step moves a weight by about 1e-4,
  // 1/78 of an ulp, so plain bf16 master weights round every update away.
  const int64_t n = 4096, steps = 500;
  std::vector<float> start = random_floats(n, 0.1f, 6);
  for (float& x : start) x += 1.0f;
  std::vector<float> fp32 = start, plain(n);
  std::vector<uint16_t> w(n), c(n);
  encode_kahan_master(start.data(), w.data(), c.data(), n);
  for (int64_t i = 0; i < n; ++i) plain[i] = bf16_to_float(float_to_bf16(start[i]));
  std::vector<float> m1(n), v1(n), m2(n), v2(n), m3(n), v3(n);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> grad(n);
  for (int64_t step = 1; step <= steps; ++step) {
    for (int64_t i = 0; i < n; ++i) grad[i] = 1.0f + 0.5f * noise(rng);  // a steady downhill push
    AdamWParams params;
    params.lr = 1e-4;
    params.weight_decay = 0.0;
    params.step = step;
    adamw_update_reference(params, fp32.data(), m1.data(), v1.data(), grad.data(), GradType::f32, 1.0f, nullptr,
                           WeightOutType::none, n);
    adamw_update_kahan(params, w.data(), c.data(), m2.data(), v2.data(), grad.data(), GradType::f32, 1.0f, n);
    adamw_update_reference(params, plain.data(), m3.data(), v3.data(), grad.data(), GradType::f32, 1.0f, nullptr,
                           WeightOutType::none, n);
    for (float& x : plain) x = bf16_to_float(float_to_bf16(x));
  }
  std::vector<float> kahan(n);
  decode_kahan_master(w.data(), c.data(), kahan.data(), n);
  // NaN, failing the checks below, if any value is not finite.
  const double moved = test_support::max_abs_difference(fp32, start);
  const double kahan_error = test_support::max_abs_difference(kahan, fp32);
  const double plain_error = test_support::max_abs_difference(plain, fp32);
  std::printf("moved %.4g; |kahan - fp32| %.3g, |plain bf16 - fp32| %.3g\n", moved, kahan_error, plain_error);
  EXPECT_GT(moved, 0.03);                   // fp32 master moved ~500 x 1e-4
  EXPECT_GT(plain_error, 0.5 * moved);      // plain bf16 lost most of it
  EXPECT_LT(kahan_error, 0.01 * moved);     // the pair kept it
}

}  // namespace
}  // namespace ferry::kernels
