// The pieces of `ferry report` below the command: metrics.jsonl read back as series (nulls counted,
// a row still being written left out, corrupt lines named by file:line), the grouping of series
// into charts (every key in exactly one chart), axis ticks and labels (constant series, a single
// point, tiny and huge values), the SVG of a chart (non-finite values skipped and counted, the
// curve cut there, thinned long series keep logged points and extremes, resume markers), markup
// escaping of config text, the page's refresh only in watch mode, and resumes.jsonl across
// fresh starts and resumes (through MetricsLogger, as the trainer uses it).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "src/metrics/chart_axis.h"
#include "src/metrics/chart_groups.h"
#include "src/metrics/markup_escape.h"
#include "src/metrics/metrics_logger.h"
#include "src/metrics/metrics_series.h"
#include "src/metrics/report_page.h"
#include "src/metrics/resume_log.h"
#include "src/metrics/svg_chart.h"
#include "tests/unit/metrics_temp_dir.h"

namespace ferry {
namespace {

// The series names each chart got, by chart id.
std::map<std::string, std::vector<std::string>> charts_of(const std::vector<std::string>& names) {
  std::map<std::string, std::vector<std::string>> by_id;
  for (const ChartGroup& g : group_series(names)) by_id[g.id] = g.series;
  return by_id;
}

TEST(ChartGroups, KeysOfEveryStageLandWherePeopleLookForThem) {
  const auto sft = charts_of({"loss", "lr", "grad_norm", "tokens_per_s", "eval_loss"});
  EXPECT_EQ(sft.at("loss"), (std::vector<std::string>{"loss", "eval_loss"}));
  EXPECT_EQ(sft.at("lr"), std::vector<std::string>{"lr"});
  EXPECT_EQ(sft.at("grad_norm"), std::vector<std::string>{"grad_norm"});
  EXPECT_EQ(sft.at("tokens_per_s"), std::vector<std::string>{"tokens_per_s"});
  EXPECT_EQ(sft.size(), 4u);

  const auto dpo = charts_of({"loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
                              "logps/chosen", "eval_rewards/accuracies", "eval_rewards/margins", "accuracy",
                              "eval_accuracy"});
  EXPECT_EQ(dpo.at("accuracy"),
            (std::vector<std::string>{"rewards/accuracies", "eval_rewards/accuracies", "accuracy", "eval_accuracy"}));
  EXPECT_EQ(dpo.at("rewards_margins"),
            (std::vector<std::string>{"rewards/chosen", "rewards/rejected", "rewards/margins", "eval_rewards/margins"}));
  EXPECT_EQ(dpo.at("logps"), std::vector<std::string>{"logps/chosen"});

  const auto ppo = charts_of({"loss", "reward/mean", "score/mean", "kl", "kl_coef", "approx_kl", "entropy", "clipfrac",
                              "value_clipfrac", "clip_ratio/low", "policy_loss", "value_loss", "grad_norm/policy",
                              "grad_norm/critic", "tokens_per_s/learn", "time/generate", "exact_match",
                              "response_length", "peak_device_bytes"});
  EXPECT_EQ(ppo.at("reward"), (std::vector<std::string>{"reward/mean", "score/mean"}));
  EXPECT_EQ(ppo.at("kl"), (std::vector<std::string>{"kl", "kl_coef", "approx_kl"}));
  EXPECT_EQ(ppo.at("entropy"), std::vector<std::string>{"entropy"});
  EXPECT_EQ(ppo.at("clip_fraction"), (std::vector<std::string>{"clipfrac", "value_clipfrac", "clip_ratio/low"}));
  EXPECT_EQ(ppo.at("loss_terms"), (std::vector<std::string>{"policy_loss", "value_loss"}));
  EXPECT_EQ(ppo.at("grad_norm"), (std::vector<std::string>{"grad_norm/policy", "grad_norm/critic"}));
  EXPECT_EQ(ppo.at("accuracy"), std::vector<std::string>{"exact_match"});
  EXPECT_EQ(ppo.at("memory"), std::vector<std::string>{"peak_device_bytes"});
  EXPECT_EQ(ppo.at("time"), std::vector<std::string>{"time/generate"});
}

TEST(ChartGroups, UnknownKeysAreOtherChartsAndNoKeyIsDroppedOrRepeated) {
  const std::vector<std::string> names = {"loss", "comm_bytes", "foo/a", "eval_foo/b", "foo/c", "weird key<&>",
                                          "a.b", "a-b", "frac_reward_zero_std"};
  const auto groups = group_series(names);
  std::multiset<std::string> drawn;
  std::set<std::string> ids;
  for (const ChartGroup& g : groups) {
    drawn.insert(g.series.begin(), g.series.end());
    EXPECT_TRUE(ids.insert(g.id).second) << "two charts named " << g.id;
    EXPECT_TRUE(std::regex_match(g.id, std::regex("[A-Za-z0-9_-]+"))) << g.id;
  }
  EXPECT_EQ(drawn, std::multiset<std::string>(names.begin(), names.end()));
  ASSERT_EQ(groups.front().id, "loss");
  EXPECT_FALSE(groups.front().other);
  const auto by_id = charts_of(names);
  EXPECT_EQ(by_id.at("other-foo"), (std::vector<std::string>{"foo/a", "eval_foo/b", "foo/c"}));
  EXPECT_EQ(by_id.at("other-comm_bytes"), std::vector<std::string>{"comm_bytes"});  // not memory
  EXPECT_TRUE(by_id.contains("other-a-b") && by_id.contains("other-a-b-2"));
  for (const ChartGroup& g : groups) EXPECT_EQ(g.other, g.id.starts_with("other-")) << g.id;
}

TEST(ChartAxis, TicksAreNiceAndCoverTheData) {
  const ChartAxis a = nice_axis(0.31, 7.6);
  EXPECT_DOUBLE_EQ(a.lo, 0.0);
  EXPECT_DOUBLE_EQ(a.hi, 8.0);
  EXPECT_DOUBLE_EQ(a.spacing, 1.0);
  EXPECT_EQ(a.ticks.size(), 9u);
  const ChartAxis b = nice_axis(0.31, 9.6);
  EXPECT_DOUBLE_EQ(b.spacing, 2.0);
  EXPECT_DOUBLE_EQ(b.hi, 10.0);
  const ChartAxis lr = nice_axis(0.0, 7.6e-4);
  EXPECT_DOUBLE_EQ(lr.spacing, 2e-4);
  EXPECT_NEAR(lr.hi, 8e-4, 1e-18);
  EXPECT_EQ(format_tick(lr.ticks[1], lr.spacing), "2e-4");
  EXPECT_EQ(format_tick(lr.ticks[0], lr.spacing), "0");
  EXPECT_EQ(format_tick(0.5, 0.5), "0.5");
  EXPECT_EQ(format_tick(15000, 5000), "15000");
  EXPECT_EQ(format_tick(2.5e8, 5e7), "2.5e8");
  EXPECT_EQ(format_tick(-1.5, 0.5), "-1.5");
  EXPECT_EQ(format_tick(1.2e-3, 2e-4), "1.2e-3");
  // A label must read back as its tick (what a person and the integration test read).
  for (const double hi : {1e-7, 3.3e-3, 0.7, 42.0, 9.9e4, 1.3e9}) {
    const ChartAxis axis = nice_axis(-hi / 3, hi);
    for (double tick : axis.ticks) {
      const double read = std::stod(format_tick(tick, axis.spacing));
      EXPECT_NEAR(read, tick, axis.spacing * 1e-9) << format_tick(tick, axis.spacing);
    }
    EXPECT_LE(axis.lo, -hi / 3);
    EXPECT_GE(axis.hi, hi);
    EXPECT_LE(axis.ticks.size(), 10u);
  }
}

TEST(ChartAxis, OneValueIsWidenedAroundIt) {
  const ChartAxis constant = nice_axis(5.0, 5.0);
  EXPECT_LT(constant.lo, 5.0);
  EXPECT_GT(constant.hi, 5.0);
  EXPECT_NEAR(constant.fraction(5.0), 0.5, 0.25);
  const ChartAxis zero = nice_axis(0.0, 0.0);
  EXPECT_DOUBLE_EQ(zero.lo, -1.0);
  EXPECT_DOUBLE_EQ(zero.hi, 1.0);
  const ChartAxis one_step = nice_axis(7, 7, 6, /*integer=*/true);
  EXPECT_DOUBLE_EQ(one_step.lo, 6.0);
  EXPECT_DOUBLE_EQ(one_step.hi, 8.0);
  EXPECT_DOUBLE_EQ(one_step.spacing, 1.0);  // never a fractional step
  const ChartAxis steps = nice_axis(1, 3, 6, /*integer=*/true);
  EXPECT_DOUBLE_EQ(steps.spacing, 1.0);
}

TEST(MetricsSeries, RowsBecomeSeriesWithNullsCountedAndAPartialLastRowLeftOut) {
  const std::string text =
      "{\"step\":1,\"loss\":2.5,\"lr\":0.0}\n"
      "\n"
      "{\"step\":2,\"loss\":null,\"lr\":1e-4}\n"
      "{\"step\":2,\"eval_loss\":2.25}\n"
      "{\"step\":3,\"loss\":2.0,\"lr\":2e-4}\n"
      "{\"step\":4,\"loss\":1.";
  const MetricsSeries m = parse_metrics_series(text, "m.jsonl");
  EXPECT_EQ(m.rows, 4u);
  EXPECT_EQ(m.last_step, 3);
  ASSERT_EQ(m.series.size(), 3u);
  EXPECT_EQ(m.series[0].name, "loss");  // first-appearance order, not alphabetical
  EXPECT_EQ(m.series[1].name, "lr");
  EXPECT_EQ(m.series[2].name, "eval_loss");
  const Series& loss = *m.find("loss");
  ASSERT_EQ(loss.points.size(), 2u);
  EXPECT_EQ(loss.points[1].step, 3);
  EXPECT_DOUBLE_EQ(loss.points[1].value, 2.0);
  EXPECT_EQ(loss.non_finite_steps, std::vector<int64_t>{2});
  EXPECT_EQ(m.find("nothing"), nullptr);
}

TEST(MetricsSeries, CorruptLinesAreNamedByFileAndLine) {
  auto message = [](const std::string& text) {
    try {
      parse_metrics_series(text, "run/metrics.jsonl");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{\"step\":1}\n{\"step\":2,\"loss\":\n{\"step\":3}\n").find("run/metrics.jsonl:2: not a JSON object"),
            std::string::npos);
  EXPECT_NE(message("{\"step\":1}\n[1,2]\n").find("run/metrics.jsonl:2"), std::string::npos);
  EXPECT_NE(message("{\"loss\":1}\n").find("run/metrics.jsonl:1: row has no integer \"step\""), std::string::npos);
  EXPECT_NE(message("{\"step\":1,\"loss\":\"high\"}\n").find("run/metrics.jsonl:1: \"loss\" is string"),
            std::string::npos);
}

// The points="..." of each polyline drawn for `series`.
std::vector<std::string> polylines_of(const std::string& svg, const std::string& series) {
  std::vector<std::string> points;
  const std::regex polyline("<polyline data-series=\"" + series + "\" points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), polyline); it != std::sregex_iterator(); ++it) {
    points.push_back((*it)[1]);
  }
  return points;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(SvgChart, NonFiniteValuesAreSkippedCountedAndCutTheCurve) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Series s{"loss", {{1, 3.0}, {2, 2.5}, {3, nan}, {4, 2.0}, {5, -inf}, {6, 1.5}}, {}};
  Series logged{"lr", {{1, 1.0}, {2, 2.0}, {4, 4.0}}, {3}};  // metrics.jsonl's null at step 3
  const std::string svg = draw_svg_chart({"Loss", {&s, &logged}, {}, std::nullopt});
  const auto loss = polylines_of(svg, "loss");
  ASSERT_EQ(loss.size(), 3u);
  EXPECT_EQ(count(loss[0], ","), 2u);
  EXPECT_EQ(count(loss[1], ","), 1u);
  EXPECT_EQ(count(loss[2], ","), 1u);
  EXPECT_EQ(polylines_of(svg, "lr").size(), 2u);
  EXPECT_NE(svg.find(">loss (2 non-finite skipped)</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">lr (1 non-finite skipped)</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(svg.find("xmlns"), std::string::npos);  // inline form
  EXPECT_NE(draw_svg_chart({"Loss", {&s}, {}, std::nullopt}, {.standalone = true}).find(
                "xmlns=\"http://www.w3.org/2000/svg\""),
            std::string::npos);
}

TEST(SvgChart, ConstantSeriesSinglePointAndEmptySeriesStillDraw) {
  Series flat{"kl_coef", {{1, 0.2}, {2, 0.2}, {3, 0.2}}, {}};
  const std::string svg = draw_svg_chart({"KL", {&flat}, {}, std::nullopt});
  const auto line = polylines_of(svg, "kl_coef");
  ASSERT_EQ(line.size(), 1u);
  std::set<std::string> ys;
  std::stringstream points(line[0]);
  for (std::string point; points >> point;) ys.insert(point.substr(point.find(',') + 1));
  EXPECT_EQ(ys.size(), 1u);  // a horizontal line
  const double y = std::stod(*ys.begin());
  EXPECT_GT(y, 34.0 + 20);  // inside the plot, away from its edges (top 34, height 200)
  EXPECT_LT(y, 234.0 - 20);

  Series one{"eval_loss", {{20, 4.97}}, {}};
  const std::string single = draw_svg_chart({"Loss", {&one}, {}, std::nullopt});
  EXPECT_EQ(polylines_of(single, "eval_loss").size(), 1u);
  EXPECT_EQ(count(single, "<circle"), 1u);  // a lone point is seen as a dot

  Series nothing{"reward/right", {}, {1, 2}};
  const std::string empty = draw_svg_chart({"Reward", {&nothing}, {}, std::nullopt});
  EXPECT_NE(empty.find("reward/right (no finite value) (2 non-finite skipped)"), std::string::npos) << empty;
  EXPECT_EQ(count(empty, "<polyline"), 0u);
}

TEST(SvgChart, LongSeriesAreThinnedToLoggedPointsKeepingExtremesAndResumesAreMarked) {
  Series long_run{"loss", {}, {}};
  for (int64_t step = 1; step <= 100000; ++step) long_run.points.push_back({step, std::sin(step * 0.001) + (step == 77777 ? 5.0 : 0.0)});
  const std::string svg = draw_svg_chart({"Loss", {&long_run}, {50000}, std::make_pair<int64_t, int64_t>(1, 100000)});
  const auto line = polylines_of(svg, "loss");
  ASSERT_EQ(line.size(), 1u);
  const size_t drawn = count(line[0], ",");
  EXPECT_LT(drawn, 4 * 640u);
  EXPECT_GT(drawn, 548u);
  // The spike at step 77777 is the top of the y axis: some point sits at the plot's top tick.
  const std::regex point("([0-9.]+),([0-9.]+)");
  double top = 1e9;
  for (auto it = std::sregex_iterator(line[0].begin(), line[0].end(), point); it != std::sregex_iterator(); ++it) {
    top = std::min(top, std::stod((*it)[2]));
  }
  EXPECT_LT(top, 34.0 + 200 * 0.2);
  EXPECT_NE(svg.find("<line class=\"resume\" data-step=\"50000\""), std::string::npos);
  EXPECT_NE(svg.find("resumed from 50000"), std::string::npos);
  // A resume outside the steps drawn is not marked.
  const std::string outside = draw_svg_chart({"Loss", {&long_run}, {500000}, std::nullopt});
  EXPECT_EQ(outside.find("class=\"resume\""), std::string::npos);
}

TEST(ReportPage, ConfigTextIsEscapedAndRefreshIsOnlyForWatching) {
  EXPECT_EQ(escape_markup("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  RunRecord run;
  run.dir = "runs/x";
  run.metrics = parse_metrics_series("{\"step\":1,\"loss\":1.0,\"<b>\":2.0}\n", "m");
  run.config_yaml = "stage: sft\nsystem: \"</pre><script>alert('x')</script>\"\n";
  run.result = {{"stage", "sft"}, {"figures", {{"engine_device_peak_bytes", 111509892}, {"eval_loss", 4.96}}}};
  ReportPage page;
  page.title = "run <1>";
  page.sections.push_back({"runs/x", "runs/x", run});
  const std::string html = render_report_html(page);
  EXPECT_NE(html.find("&lt;/pre&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("data-series=\"&lt;b&gt;\""), std::string::npos);
  EXPECT_NE(html.find("<title>run &lt;1&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find(" MiB (111509892 bytes)"), std::string::npos) << html;  // the memory table
  EXPECT_EQ(html.find("http-equiv=\"refresh\""), std::string::npos);
  page.refresh_seconds = 7;
  EXPECT_NE(render_report_html(page).find("<meta http-equiv=\"refresh\" content=\"7\">"), std::string::npos);
}

TEST(ResumeLog, FollowsTheRowsOfMetricsJsonlThroughResumesAndFreshStarts) {
  const auto dir = test_support::fresh_test_dir("ferry_resume_log");
  LoggingConfig config;
  config.tensorboard = false;
  std::ostringstream console;
  auto start = [&](std::optional<int64_t> resume_step) {
    MetricsLoggerOptions options;
    options.total_steps = 10;
    options.resume_step = resume_step;
    options.console = &console;
    options.wall_clock = [] { return 1700000000.0; };
    MetricsLogger logger(config, dir, options);
  };
  start(std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(resume_log_path_in(dir)));  // a fresh run writes no file
  start(4);
  start(8);
  EXPECT_EQ(read_resume_steps(dir), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(read_file(resume_log_path_in(dir)),
            "{\"step\":4,\"unix_time\":1700000000.0}\n{\"step\":8,\"unix_time\":1700000000.0}\n");
  start(6);  // step-8 was lost: its resume goes with its rows
  EXPECT_EQ(read_resume_steps(dir), (std::vector<int64_t>{4, 6}));
  start(6);
  EXPECT_EQ(read_resume_steps(dir), (std::vector<int64_t>{4, 6}));  // each step once
  start(std::nullopt);
  EXPECT_TRUE(read_resume_steps(dir).empty());
  write_file_atomic(resume_log_path_in(dir), "{\"step\":2}\nnot json\n");
  EXPECT_THROW(read_resume_steps(dir), InputError);
  test_support::remove_tree(dir);
}

}  // namespace
}  // namespace ferry
