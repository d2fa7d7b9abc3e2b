// The pipeline's closing table (see pipeline_summary.h).
#include "cli/pipeline_summary.h"

#include <cstdio>
#include <iomanip>
#include <sstream>

namespace ferry::cli {
namespace {

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string percent(double fraction) { return fixed(100.0 * fraction, 1) + "%"; }

double number(const nlohmann::json& j, const char* key) { return j.at(key).get<double>(); }

// What a stage's figures say, in one phrase.
std::string stage_figure(const StageOutcome& s) {
  const nlohmann::json& f = s.figures;
  if (f.is_null()) return "no result.json";
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (s.command == "train-sft" && f.contains("eval_loss")) add("eval loss " + fixed(number(f, "eval_loss"), 4));
  if (s.command == "train-rm" && f.contains("eval_accuracy")) add("held-out pair accuracy " + percent(number(f, "eval_accuracy")));
  if (s.command == "train-dpo" && f.contains("eval_rewards/accuracies")) {
    add("held-out reward accuracy " + percent(number(f, "eval_rewards/accuracies")));
  }
  if (s.command == "train-kto" && f.contains("eval_rewards/margins")) {
    add("held-out reward margin " + fixed(number(f, "eval_rewards/margins"), 4));
  }
  if (f.contains("rollouts")) {
    add(std::to_string(f.at("rollouts").get<int64_t>()) + " rollouts" +
        (f.contains("kl_coef") ? ", KL coef " + fixed(number(f, "kl_coef"), 4) : std::string()));
  }
  if (text.empty() && f.contains("last_loss")) add("last loss " + fixed(number(f, "last_loss"), 4));
  return text;
}

std::string exact_match(const nlohmann::json& e) {
  if (e.at("with_answer").get<int64_t>() == 0) return "-";
  return std::to_string(e.at("correct").get<int64_t>()) + "/" + std::to_string(e.at("with_answer").get<int64_t>()) +
         " = " + percent(number(e, "accuracy"));
}

}  // namespace

void print_pipeline_summary(std::ostream& out, const std::vector<StageOutcome>& stages) {
  out << "\npipeline summary\n";
  size_t width = 0;
  for (const StageOutcome& s : stages) width = std::max(width, s.output_dir.size());
  for (const StageOutcome& s : stages) {
    out << "  " << std::left << std::setw(11) << s.command << std::setw(static_cast<int>(width) + 2) << s.output_dir
        << stage_figure(s) << (s.reused ? "  (reused)" : "") << "\n";
  }
  for (const StageOutcome& s : stages) {
    if (s.figures.is_null() || !s.figures.contains("eval_before") || !s.figures.contains("eval_after")) continue;
    const nlohmann::json& before = s.figures.at("eval_before");
    const nlohmann::json& after = s.figures.at("eval_after");
    const std::string title = "held-out prompts (" + s.eval_file + ")";
    out << "\n  " << std::left << std::setw(44) << title << std::setw(22) << "starting model" << s.command
        << " model\n";
    if (before.contains("mean_reward") && after.contains("mean_reward")) {
      out << "  " << std::setw(44) << "mean reward" << std::setw(22) << fixed(number(before, "mean_reward"), 4)
          << fixed(number(after, "mean_reward"), 4) << "\n";
    }
    out << "  " << std::setw(44) << "exact match" << std::setw(22) << exact_match(before) << exact_match(after) << "\n";
    out << "  " << std::setw(44) << "mean answer length (tokens)" << std::setw(22) << fixed(number(before, "mean_length"), 2)
        << fixed(number(after, "mean_length"), 2) << "\n";
  }
}

}  // namespace ferry::cli
