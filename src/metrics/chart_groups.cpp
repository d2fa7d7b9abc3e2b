// The table of known chart groups and the fallback for other keys (see chart_groups.h).
#include "src/metrics/chart_groups.h"

#include <functional>
#include <map>
#include <string_view>

namespace ferry {
namespace {

bool starts(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }
bool ends(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }
bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

struct KnownGroup {
  const char* id;
  const char* title;
  std::function<bool(std::string_view)> holds;  // of the key without its "eval_" prefix
};

// First match wins, so the order matters where two could claim a key (rewards/accuracies is an
// accuracy before it is one of the rewards/ figures).
const std::vector<KnownGroup>& known_groups() {
  static const std::vector<KnownGroup> groups = {
      {"loss", "Loss", [](std::string_view k) { return k == "loss"; }},
      {"lr", "Learning rate",
       [](std::string_view k) { return k == "lr" || starts(k, "lr/") || ends(k, "_lr") || has(k, "learning_rate"); }},
      {"grad_norm", "Gradient norm", [](std::string_view k) { return starts(k, "grad_norm"); }},
      {"loss_terms", "Loss terms", [](std::string_view k) { return ends(k, "_loss"); }},
      {"reward", "Reward",
       [](std::string_view k) {
         return k == "reward" || starts(k, "reward/") || starts(k, "score/") || starts(k, "objective/scores") ||
                k == "objective/rlhf_reward" || k == "objective/non_score_reward";
       }},
      {"kl", "KL",
       [](std::string_view k) {
         return k == "kl" || k == "approx_kl" || k == "kl_coef" || k == "objective/kl" || starts(k, "kl/");
       }},
      {"entropy", "Entropy", [](std::string_view k) { return k == "entropy" || k == "objective/entropy"; }},
      {"clip_fraction", "Clip fraction",
       [](std::string_view k) { return has(k, "clipfrac") || starts(k, "clip_ratio") || has(k, "clip_fraction"); }},
      {"accuracy", "Accuracy",
       [](std::string_view k) { return ends(k, "accuracy") || k == "rewards/accuracies" || k == "exact_match"; }},
      {"rewards_margins", "Rewards and margins", [](std::string_view k) { return starts(k, "rewards/"); }},
      {"logps", "Log-probabilities", [](std::string_view k) { return starts(k, "logps/") || starts(k, "logits/"); }},
      {"responses", "Responses",
       [](std::string_view k) {
         return k == "response_length" || k == "ended_fraction" || k == "dropped_responses" ||
                k == "val/contain_eos_token";
       }},
      {"episodes", "Episodes", [](std::string_view k) { return starts(k, "episode/") || starts(k, "env/"); }},
      {"tokens_per_s", "Tokens per second", [](std::string_view k) { return starts(k, "tokens_per_s"); }},
      {"time", "Time (seconds)", [](std::string_view k) { return starts(k, "time/"); }},
      {"memory", "Memory (bytes)",
       [](std::string_view k) { return has(k, "memory") || starts(k, "mem/") || (ends(k, "bytes") && !has(k, "comm")); }},
  };
  return groups;
}

std::string without_eval_prefix(const std::string& name) {
  return name.starts_with("eval_") && name.size() > 5 ? name.substr(5) : name;
}

// A name safe in a file name and an HTML attribute: letters, digits, '_' and '-'.
std::string file_safe(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    out.push_back(plain ? c : '-');
  }
  return out;
}

}  // namespace

std::vector<ChartGroup> group_series(const std::vector<std::string>& names) {
  const auto& known = known_groups();
  std::vector<ChartGroup> known_charts(known.size());
  std::vector<ChartGroup> other_charts;
  std::map<std::string, size_t> other_index;  // the other key's family ("comm_bytes", "foo/") -> chart
  for (const std::string& name : names) {
    const std::string base = without_eval_prefix(name);
    bool placed = false;
    for (size_t g = 0; g < known.size() && !placed; ++g) {
      if (!known[g].holds(base)) continue;
      known_charts[g].series.push_back(name);
      placed = true;
    }
    if (placed) continue;
    const size_t slash = base.find('/');
    const std::string family = slash == std::string::npos ? base : base.substr(0, slash + 1);
    auto [it, added] = other_index.try_emplace(family, other_charts.size());
    if (added) {
      const std::string title = slash == std::string::npos ? family : family + "*";
      other_charts.push_back({"other-" + file_safe(slash == std::string::npos ? family : family.substr(0, slash)),
                              title, {}, true});
    }
    other_charts[it->second].series.push_back(name);
  }
  std::vector<ChartGroup> charts;
  for (size_t g = 0; g < known.size(); ++g) {
    if (known_charts[g].series.empty()) continue;
    known_charts[g].id = known[g].id;
    known_charts[g].title = known[g].title;
    charts.push_back(std::move(known_charts[g]));
  }
  for (auto& chart : other_charts) charts.push_back(std::move(chart));
  // Two other keys can map to one file-safe id ("a.b", "a-b"): number the later ones.
  std::map<std::string, int> uses;
  for (auto& chart : charts) {
    const int n = ++uses[chart.id];
    if (n > 1) chart.id += "-" + std::to_string(n);
  }
  return charts;
}

}  // namespace ferry
