// Ferry's learning-rate schedules against transformers' schedulers, step by step.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/config/config_enum.h"
#include "train/lr_schedule.h"

namespace ferry {
namespace {

TEST(LrScheduleParity, MatchesTransformers) {
  std::ifstream in(std::string(FERRY_FIXTURES_DIR) + "/train_lr_schedule/lr_schedules.json");
  ASSERT_TRUE(in) << "run the parity_fixtures test first";
  const auto cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 6u);
  for (const auto& c : cases) {
    LrSchedulePlan plan;
    ASSERT_TRUE(enum_parse(c["kind"].get<std::string>(), plan.kind));
    plan.peak_lr = c["peak"];
    plan.warmup_steps = c["warmup"];
    plan.total_steps = c["total"];
    plan.min_lr_ratio = c["min_ratio"];
    const auto& lrs = c["lrs"];
    for (size_t step = 0; step < lrs.size(); ++step) {
      const double expected = lrs[step];
      EXPECT_NEAR(learning_rate_at(plan, static_cast<int64_t>(step)), expected, 1e-12 + 1e-9 * expected)
          << c["kind"] << " warmup " << plan.warmup_steps << " total " << plan.total_steps << " step " << step;
    }
  }
}

}  // namespace
}  // namespace ferry
