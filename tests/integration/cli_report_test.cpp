// `ferry report` end to end. A short SFT run, resumed once, then its report: one self-contained
// HTML file (nothing fetched: no http(s) URL, no script, no stylesheet link), one chart per
// expected group, every key of metrics.jsonl drawn, and every point of every polyline equal to
// metrics.jsonl's value, read back through the chart's own tick labels (pixel -> value from two
// labelled ticks: an independent reading of the drawing, as a person reads it), the resume marked
// where resumes.jsonl says. Then: bad folders and corrupt lines exit 2 naming them; --png writes one
// PNG per chart (skipped without rsvg-convert) and says how to install it when missing; --watch
// rewrites the page with a reload tag until SIGTERM and leaves it without; `ferry pipeline`
// writes pipeline.json and the report of its folder and prints its path.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/ferry_process.h"

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::read_text;
using ferry_test::run_ferry;
namespace fs = std::filesystem;

// A small, fast version of configs/demo-sft.yaml (as stages_sft_cli_test's).
std::string small_sft(const fs::path& out, int steps) {
  return "train-sft --config configs/demo-sft.yaml --set output.dir=" + out.string() +
         " --set data.max_samples=64 --set data.eval_file= --set data.eval_fraction=0.1"
         " --set train.micro_batch_size=4 --set train.max_steps=" + std::to_string(steps) +
         " --set train.save_every=2 --set train.eval_every=2" + ferry_test::kQuietCpu;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The matches of `pattern` in `text` (which must outlive them).
std::vector<std::smatch> matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<std::smatch> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) found.push_back(*it);
  return found;
}

// A linear map from pixels to values, fixed by the first and last labelled tick of an axis.
struct AxisReading {
  double pixel0 = 0, value0 = 0, pixel1 = 1, value1 = 1;
  double value_at(double pixel) const { return value0 + (pixel - pixel0) * (value1 - value0) / (pixel1 - pixel0); }
  double per_pixel() const { return std::abs((value1 - value0) / (pixel1 - pixel0)); }
};

AxisReading read_axis(const std::string& svg, const std::string& cls, const std::string& coordinate) {
  const auto ticks = matches(svg, "<g class=\"" + cls + "\"><line[^>]*" + coordinate + "=\"([^\"]+)\"[^>]*/><text[^>]*>([^<]+)</text></g>");
  EXPECT_GE(ticks.size(), 2u) << cls << " in " << svg;
  if (ticks.size() < 2) return {};
  return {std::stod(ticks.front()[1]), std::stod(ticks.front()[2]), std::stod(ticks.back()[1]), std::stod(ticks.back()[2])};
}

struct Point {
  double step;
  double value;
};

// metrics.jsonl's finite values per key, in file order.
std::map<std::string, std::vector<Point>> logged_values(const fs::path& metrics) {
  std::map<std::string, std::vector<Point>> values;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto row = nlohmann::json::parse(line);
    for (const auto& [key, value] : row.items()) {
      if (key != "step" && value.is_number()) values[key].push_back({row.at("step").get<double>(), value.get<double>()});
    }
  }
  return values;
}

// Each <figure data-chart="ID"> of the page and its SVG.
std::map<std::string, std::string> charts_of(const std::string& html) {
  std::map<std::string, std::string> charts;
  for (const auto& m : matches(html, "<figure data-chart=\"([^\"]+)\">\\s*(<svg[\\s\\S]*?</svg>)")) charts[m[1]] = m[2];
  return charts;
}

// The page has no way to reach the network or run code.
void expect_self_contained(const std::string& html) {
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
}

// Every polyline point of every chart read back through the tick labels equals metrics.jsonl.
void expect_points_are_the_logged_values(const std::string& html, const fs::path& metrics) {
  const auto logged = logged_values(metrics);
  std::map<std::string, std::vector<Point>> drawn;
  for (const auto& [id, svg] : charts_of(html)) {
    const AxisReading x = read_axis(svg, "xtick", "x1");
    const AxisReading y = read_axis(svg, "ytick", "y1");
    for (const auto& line : matches(svg, "<polyline data-series=\"([^\"]+)\" points=\"([^\"]*)\"")) {
      const std::string points = line[2];  // matches() keeps positions into the string it searched
      for (const auto& p : matches(points, "([-0-9.]+),([-0-9.]+)")) {
        const double step = x.value_at(std::stod(p[1])), value = y.value_at(std::stod(p[2]));
        // Coordinates are written to 0.01 px: allow 0.02 px of each axis.
        EXPECT_NEAR(step, std::round(step), 0.02 * x.per_pixel()) << id << " " << line[1];
        drawn[line[1]].push_back({std::round(step), value});
        if (!logged.contains(line[1])) continue;
        const auto& expected = logged.at(line[1]);
        const size_t i = drawn[line[1]].size() - 1;
        if (i >= expected.size()) continue;
        EXPECT_EQ(std::round(step), expected[i].step) << line[1] << " point " << i;
        EXPECT_NEAR(value, expected[i].value, 0.02 * y.per_pixel()) << line[1] << " point " << i << " in chart " << id;
      }
    }
  }
  for (const auto& [key, values] : logged) {
    ASSERT_TRUE(drawn.contains(key)) << key << " is logged but not drawn";
    EXPECT_EQ(drawn.at(key).size(), values.size()) << key;
  }
  EXPECT_EQ(drawn.size(), logged.size());
}

TEST(ReportCli, ShortSftRunResumedGivesAPageWhosePointsAreTheLoggedValues) {
  const fs::path out = ferry_test::process_temp_dir("ferry_report_sft");
  fs::remove_all(out);
  const Result first = run_ferry(small_sft(out, 4));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const Result resumed = run_ferry(small_sft(out, 6) + " --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(read_text(out / "resumes.jsonl").substr(0, 10), "{\"step\":4,");

  const Result r = run_ferry("report " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "report: " + (out / "report.html").string());
  EXPECT_CONTAINS(r.output, "4 charts");
  const std::string html = read_text(out / "report.html");
  expect_self_contained(html);
  const auto charts = charts_of(html);
  std::set<std::string> ids;
  for (const auto& [id, svg] : charts) ids.insert(id);
  EXPECT_EQ(ids, (std::set<std::string>{"loss", "lr", "grad_norm", "tokens_per_s"}));
  EXPECT_EQ(count(html, "<svg"), 4u);
  for (const auto& [key, values] : logged_values(out / "metrics.jsonl")) {
    EXPECT_CONTAINS(html, "data-series=\"" + key + "\"");
  }
  EXPECT_CONTAINS(charts.at("loss"), "data-series=\"eval_loss\"");
  expect_points_are_the_logged_values(html, out / "metrics.jsonl");
  // The resume: a marker on every chart and a note; the resolved config; no reload without --watch.
  EXPECT_EQ(count(html, "<line class=\"resume\" data-step=\"4\""), 4u);
  EXPECT_CONTAINS(html, "Resumed from the checkpoint of step 4");
  EXPECT_CONTAINS(html, "<pre># Resolved Ferry config");
  EXPECT_CONTAINS(html, "\nstage: sft  #");
  EXPECT_CONTAINS(html, "max_steps: 6");
  EXPECT_CONTAINS(html, "<h3>Memory</h3>");
  // The memory plan the run set its engine up with: the resumed run's replaces the first one's.
  const std::string plan = read_text(out / "memory_plan.txt");
  EXPECT_EQ(count(plan, "(as configured"), 1u) << plan;
  EXPECT_CONTAINS(html, "<h3>Memory plan</h3>");
  EXPECT_CONTAINS(html, plan.substr(0, plan.find(' ', 16)));
  EXPECT_EQ(html.find("http-equiv=\"refresh\""), std::string::npos);

  // --output elsewhere.
  const fs::path elsewhere = out / "pages" / "sft.html";
  const Result moved = run_ferry("report " + out.string() + " --output " + elsewhere.string());
  ASSERT_EQ(moved.exit_code, 0) << moved.output;
  EXPECT_TRUE(fs::exists(elsewhere));
}

// A run folder written by hand: what the commands below need without training.
fs::path hand_written_run(const std::string& name) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_report_hand") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "metrics.jsonl") << "{\"step\":1,\"loss\":2.0,\"lr\":1e-4,\"my_counter\":3}\n"
                                          "{\"step\":2,\"loss\":null,\"lr\":2e-4,\"my_counter\":5}\n"
                                          "{\"step\":3,\"loss\":1.5,\"lr\":3e-4,\"my_counter\":4}\n"
                                          "{\"step\":3,\"eval_loss\":1.75}\n";
  return dir;
}

TEST(ReportCli, FoldersWithoutMetricsAndCorruptLinesExit2NamingThem) {
  const fs::path run = hand_written_run("run");
  const fs::path empty = run.parent_path() / "empty";
  fs::create_directories(empty);
  Result r = run_ferry("report " + empty.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, empty.string() + ": no metrics.jsonl here");
  r = run_ferry("report " + run.parent_path().string());  // the folder above a run names it
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "these folders in it hold runs: run");
  r = run_ferry("report " + (run.parent_path() / "missing").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "missing: no such folder");

  const fs::path corrupt = run.parent_path() / "corrupt";
  fs::create_directories(corrupt);
  std::ofstream(corrupt / "metrics.jsonl") << "{\"step\":1,\"loss\":2.0}\n{\"step\":2,\"loss\":\n{\"step\":3,\"loss\":1.0}\n";
  r = run_ferry("report " + corrupt.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, (corrupt / "metrics.jsonl").string() + ":2: not a JSON object");
  EXPECT_FALSE(fs::exists(corrupt / "report.html"));

  // An unknown key gets its own chart; the null is counted; --interval needs --watch.
  r = run_ferry("report " + run.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = read_text(run / "report.html");
  EXPECT_CONTAINS(html, "<h3>Other series</h3>");
  EXPECT_CONTAINS(html, "data-chart=\"other-my_counter\"");
  EXPECT_CONTAINS(html, "loss (1 non-finite skipped)");
  expect_points_are_the_logged_values(html, run / "metrics.jsonl");
  EXPECT_EQ(run_ferry("report " + run.string() + " --interval 2").exit_code, 2);

  // --png without rsvg-convert on PATH: exit 2 with the package to install.
  r = ferry_test::run_ferry_with_env("PATH=/nonexistent", "report " + run.string() + " --png " + (run / "png").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "apt-get install librsvg2-bin");
}

bool on_path(const std::string& program) {
  return ferry_test::run_command("command -v " + program + " >/dev/null").exit_code == 0;
}

TEST(ReportCli, PngOnePerChart) {
  if (!on_path("rsvg-convert")) GTEST_SKIP() << "[needs rsvg_convert] apt-get install librsvg2-bin";
  const fs::path run = hand_written_run("png");
  const fs::path png = run / "png";
  const Result r = run_ferry("report " + run.string() + " --png " + png.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "png: 3 files in " + png.string());
  for (const char* name : {"loss.png", "lr.png", "other-my_counter.png"}) {
    const std::string bytes = read_text((png / name).string());
    ASSERT_GT(bytes.size(), 2000u) << name;
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << name;
    // IHDR: width and height, big-endian, at bytes 16 and 20 (the SVG is 640 wide).
    auto be32 = [&](size_t at) {
      return (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) |
             (uint32_t(uint8_t(bytes[at + 2])) << 8) | uint32_t(uint8_t(bytes[at + 3]));
    };
    EXPECT_EQ(be32(16), 640u) << name;
    EXPECT_GT(be32(20), 250u) << name;
  }
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(png)) files += entry.is_regular_file();
  EXPECT_EQ(files, 3u);  // no temporary SVG left behind
}

TEST(ReportCli, WatchRewritesWithAReloadUntilSigtermThenLeavesAPageWithout) {
  const fs::path run = hand_written_run("watch");
  const fs::path log = run / "watch.log";
  const pid_t child = ferry_test::start_ferry("report " + run.string() + " --watch --interval 1", log.string());
  ASSERT_GT(child, 0);
  auto wait_for = [&](const std::string& needle) {
    for (int i = 0; i < 150; ++i) {
      if (read_text(run / "report.html").find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  EXPECT_TRUE(wait_for("<meta http-equiv=\"refresh\" content=\"1\">")) << read_text(log.string());
  std::ofstream(run / "metrics.jsonl", std::ios::app) << "{\"step\":4,\"loss\":1.25}\n";  // the run goes on
  EXPECT_TRUE(wait_for("up to step 4")) << read_text(log.string());
  const auto status = ferry_test::stop_ferry(child, SIGTERM);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << read_text(log.string());
  const std::string html = read_text(run / "report.html");
  EXPECT_EQ(html.find("http-equiv=\"refresh\""), std::string::npos);
  EXPECT_CONTAINS(html, "up to step 4");
  EXPECT_CONTAINS(read_text(log.string()), "stopped watching");
}

TEST(ReportCli, PipelineWritesItsRecordAndReportAndPrintsThePath) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_report_pipeline");
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto stage = [&](const std::string& name) {
    return ferry_test::write_text(
        dir, name + ".yaml",
        "stage: sft\nmodel: {config: configs/demo-model.json}\ntokenizer: {path: data/tokenizer.model, chat_template: demo}\n"
        "data: {train_file: data/sft_eval.jsonl, max_samples: 32, max_length: 64}\n"
        "train: {micro_batch_size: 8, max_steps: 2, learning_rate: 1.0e-3}\noutput: {dir: " + (dir / "runs" / name).string() + "}\n");
  };
  const std::string pipeline =
      ferry_test::write_text(dir, "pipeline.yaml", "pipeline:\n  stages: [" + stage("first") + ", " + stage("second") + "]\n");
  const Result r = run_ferry("pipeline --config " + pipeline + ferry_test::kQuietCpu);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path folder = dir / "runs";
  // The printed path (relative to the working folder when inside it) is the folder's report.html.
  const size_t at = r.output.find("\nreport: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string printed = r.output.substr(at + 9, r.output.find(" (", at) - at - 9);
  const fs::path printed_path = fs::path(printed).is_absolute() ? fs::path(printed) : fs::path(FERRY_SOURCE_DIR) / printed;
  ASSERT_TRUE(fs::exists(printed_path)) << printed;
  EXPECT_TRUE(fs::equivalent(printed_path, folder / "report.html")) << printed;
  const auto record = nlohmann::json::parse(read_text((folder / "pipeline.json").string()));
  ASSERT_EQ(record.at("stages").size(), 2u);
  EXPECT_EQ(record.at("stages")[1].at("folder"), "second");
  EXPECT_EQ(record.at("stages")[1].at("state"), "done");
  const std::string html = read_text((folder / "report.html").string());
  expect_self_contained(html);
  EXPECT_CONTAINS(html, "<h2>Pipeline summary</h2>");
  EXPECT_CONTAINS(html, "1. train-sft (supervised fine-tuning): " + (folder / "first").string());
  EXPECT_CONTAINS(html, "2. train-sft (supervised fine-tuning): " + (folder / "second").string());
  EXPECT_EQ(count(html, "<svg"), 8u);  // loss, lr, grad_norm, tokens_per_s per stage

  // A stage that has not logged yet is a line; none logged is exit 2 naming pipeline.json.
  fs::remove(folder / "second" / "metrics.jsonl");
  Result again = run_ferry("report " + folder.string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_CONTAINS(read_text((folder / "report.html").string()), "no metrics.jsonl yet");
  fs::remove(folder / "first" / "metrics.jsonl");
  again = run_ferry("report " + folder.string());
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_CONTAINS(again.output, (folder / "pipeline.json").string() + " lists 2 stage(s) and none has a metrics.jsonl yet");
}

}  // namespace
