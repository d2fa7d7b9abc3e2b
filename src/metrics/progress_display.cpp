// Progress text, in-place redraw and the ETA moving average.
#include "src/metrics/progress_display.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/byte_size.h"
#include "core/error.h"

namespace ferry {
namespace {

// Values the bar knows how to show compactly, in display order.
constexpr const char* kBarMetrics[] = {"loss", "lr", "grad_norm", "tokens_per_s"};

bool is_bar_metric(const std::string& name) {
  for (const char* known : kBarMetrics) {
    if (name == known) return true;
  }
  return false;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string printf_text(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

// "loss 2.3456", "lr 2.00e-05", "5120 tok/s": precision chosen per kind of value.
std::string format_metric(const std::string& name, double value) {
  if (name == "tokens_per_s") return printf_text("%.0f", value) + " tok/s";
  if (name == "lr" || ends_with(name, "_lr")) return name + " " + printf_text("%.2e", value);
  if (name == "loss" || ends_with(name, "_loss")) return name + " " + printf_text("%.4f", value);
  if (name == "grad_norm") return name + " " + printf_text("%.3f", value);
  return name + " " + printf_text("%.4g", value);
}

}  // namespace

std::string format_eta(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buffer[48];
  if (total < 60) {
    std::snprintf(buffer, sizeof(buffer), "%llds", static_cast<long long>(total));
  } else if (total < 3600) {
    std::snprintf(buffer, sizeof(buffer), "%lldm%02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%lldh%02lldm", static_cast<long long>(total / 3600),
                  static_cast<long long>((total % 3600) / 60));
  }
  return buffer;
}

ProgressDisplay::ProgressDisplay(std::ostream& out, ProgressOptions options) : out_(out), options_(std::move(options)) {
  FERRY_CHECK(options_.log_every >= 1, "log_every must be at least 1, got ", options_.log_every);
  FERRY_CHECK(options_.eta_window >= 1, "eta_window must be at least 1");
  FERRY_CHECK(static_cast<bool>(options_.clock), "ProgressDisplay needs a clock");
}

double ProgressDisplay::mean_step_seconds() const {
  if (recent_.size() < 2) return 0.0;
  const auto steps = recent_.back().first - recent_.front().first;
  if (steps <= 0) return 0.0;
  return (recent_.back().second - recent_.front().second) / static_cast<double>(steps);
}

void ProgressDisplay::train_step(int64_t step, const MetricValues& values) {
  // A step number that does not increase (a re-run step) restarts the timing window.
  if (!recent_.empty() && step <= recent_.back().first) recent_.clear();
  recent_.emplace_back(step, options_.clock());
  while (recent_.size() > options_.eta_window + 1) recent_.pop_front();

  if (options_.style == ProgressStyle::in_place) {
    draw_in_place(step_text(step, values, /*all_values=*/false));
    return;
  }
  const bool last = options_.total_steps > 0 && step == options_.total_steps;
  const double now = recent_.back().second;
  const bool due = step % options_.log_every == 0 &&
                   (!last_line_time_ || options_.line_seconds <= 0 || now - *last_line_time_ >= options_.line_seconds);
  if (due || last) {
    out_ << step_text(step, values, /*all_values=*/true) << '\n' << std::flush;
    last_line_time_ = now;
  }
}

void ProgressDisplay::eval(int64_t step, const MetricValues& values) {
  clear_in_place();
  std::string text = "eval step ";
  text += std::to_string(step);
  for (const auto& v : values) text.append(" | ").append(format_metric(v.name, v.value));
  out_ << text << '\n' << std::flush;
}

void ProgressDisplay::finish() {
  if (drawn_width_ == 0) return;
  out_ << '\n' << std::flush;
  drawn_width_ = 0;
}

std::string ProgressDisplay::step_text(int64_t step, const MetricValues& values, bool all_values) const {
  std::string text = "step ";
  text += std::to_string(step);
  if (options_.total_steps > 0) text.append("/").append(std::to_string(options_.total_steps));
  const auto add_field = [&text](const std::string& field) { text.append(" | ").append(field); };
  for (const char* name : kBarMetrics) {
    if (const auto value = find_metric(values, name)) add_field(format_metric(name, *value));
  }
  if (all_values) {
    for (const auto& v : values) {
      if (!is_bar_metric(v.name)) add_field(format_metric(v.name, v.value));
    }
  }
  if (options_.memory_bytes) {
    if (const uint64_t bytes = options_.memory_bytes(); bytes > 0) add_field("mem " + format_bytes_approx(bytes));
  }
  const double per_step = mean_step_seconds();
  if (options_.total_steps > 0 && per_step > 0.0) {
    const auto left = std::max<int64_t>(0, options_.total_steps - step);
    add_field("ETA " + format_eta(per_step * static_cast<double>(left)));
  }
  return text;
}

void ProgressDisplay::draw_in_place(const std::string& text) {
  // Pad with spaces over what a longer previous bar left on the line (no terminal codes needed).
  const size_t pad = drawn_width_ > text.size() ? drawn_width_ - text.size() : 0;
  out_ << '\r' << text << std::string(pad, ' ') << std::flush;
  drawn_width_ = text.size();
}

void ProgressDisplay::clear_in_place() {
  if (drawn_width_ == 0) return;
  out_ << '\r' << std::string(drawn_width_, ' ') << '\r';
  drawn_width_ = 0;
}

}  // namespace ferry
