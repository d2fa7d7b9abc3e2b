// `ferry report FOLDER [--output report.html] [--png DIR] [--watch [--interval SECONDS]]`: the
// curves of a run (its output.dir) or of a pipeline (its folder, where `ferry pipeline` wrote
// pipeline.json) as one self-contained HTML page (run_report.h), optionally one PNG per chart.
// --watch rewrites the page every --interval seconds (default 5), the page reloading itself as
// often, until Ctrl-C or SIGTERM, then writes it a last time without the reload and exits 0;
// it waits for a run that has not logged its first step yet.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/run_report.h"
#include "core/byte_size.h"
#include "train/stop_signal.h"

namespace ferry::cli {
namespace {

struct ReportArgs {
  std::string folder;
  std::string output;
  std::string png_dir;
  bool watch = false;
  int interval = 5;
};

void say_written(const WrittenReport& written) {
  std::cout << "report: " << written.html.string() << " (" << format_bytes_approx(written.html_bytes) << ", "
            << written.charts << " charts)\n";
  if (!written.pngs.empty()) {
    std::cout << "png: " << written.pngs.size() << " files in " << written.pngs.front().parent_path().string() << "\n";
  }
}

void watch(const ReportArgs& args, ReportOptions options) {
  StopSignal stop;
  options.refresh_seconds = args.interval;
  std::cout << "watching " << args.folder << ": the report is rewritten every " << args.interval
            << " s (Ctrl-C stops)\n" << std::flush;
  bool written_once = false;
  bool said_waiting = false;
  while (!stop.requested()) {
    if (has_report_data(args.folder)) {
      const WrittenReport written = write_report(args.folder, options);
      if (!written_once) say_written(written);
      written_once = true;
    } else if (!said_waiting) {
      std::cout << "waiting for " << args.folder << " to log its first step (metrics.jsonl)\n" << std::flush;
      said_waiting = true;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(args.interval);
    while (!stop.requested() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (has_report_data(args.folder)) {  // the last state, as a page that no longer reloads
    options.refresh_seconds.reset();
    say_written(write_report(args.folder, options));
  }
  std::cout << "stopped watching\n";
}

void run_report(const ReportArgs& args) {
  ReportOptions options;
  options.output = args.output;
  options.png_dir = args.png_dir;
  if (args.watch) {
    watch(args, options);
    return;
  }
  say_written(write_report(args.folder, options));
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* command = app.add_subcommand(
      "report", "Write a run's or a pipeline's curves, config and memory figures as one self-contained HTML page");
  command->add_option("folder", args->folder, "a run's output.dir (with metrics.jsonl) or a pipeline's folder (with pipeline.json)")
      ->required();
  command->add_option("--output,-o", args->output, "the HTML file to write (default: FOLDER/report.html)");
  command->add_option("--png", args->png_dir, "also write one PNG per chart into this folder (needs rsvg-convert: apt-get install librsvg2-bin)");
  auto* watch_flag = command->add_flag("--watch", args->watch, "rewrite the page every --interval seconds while the run goes on, until Ctrl-C");
  command->add_option("--interval", args->interval, "seconds between rewrites with --watch (default 5)")
      ->check(CLI::Range(1, 3600))
      ->needs(watch_flag);
  command->callback([args] { run_report(*args); });
}

}  // namespace ferry::cli
