// Chat-template rendering throughput of Ferry's Jinja renderer (src/tokenizer/jinja) on the
// parity corpus (tests/parity/jinja_templates_ref.py's cases.json: 55 templates x 16
// conversations). Each conversation that transformers renders is rendered from its recorded
// variables; templates are parsed once, before timing, as transformers caches compiled ones.
// scripts/bench-templates.sh runs this beside transformers' apply_chat_template.
//
//   jinja_templates_bench --cases cases.json [--reps 20]
//
// Prints conversations/s (best pass), the parse time, and RESULT lines for the script.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/tokenizer/jinja/template.h"
#include "tests/support/jinja_clock.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  const ferry::jinja::Template* tpl;
  const nlohmann::ordered_json* variables;
  const std::string* expected;
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string cases_path;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--cases")) cases_path = argv[i + 1];
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  if (cases_path.empty()) {
    std::fprintf(stderr, "usage: jinja_templates_bench --cases cases.json [--reps N]\n");
    return 2;
  }
  std::ifstream in(cases_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const auto fixture = nlohmann::ordered_json::parse(text.str());

  const ferry::jinja::RenderOptions options = ferry::test_support::pinned_clock();

  const auto parse_start = Clock::now();
  std::map<std::string, ferry::jinja::Template> templates;
  for (const auto& [name, source] : fixture["templates"].items()) {
    templates.emplace(name, ferry::jinja::Template::parse(source.get_ref<const std::string&>(), name));
  }
  const double parse_seconds = seconds_since(parse_start);

  std::vector<Case> cases;
  std::vector<std::string> expected;
  expected.reserve(fixture["cases"].size());
  for (const auto& c : fixture["cases"]) {
    if (!c.contains("expected")) continue;  // transformers raises: nothing to time
    expected.push_back(c["expected"].get<std::string>());
    cases.push_back({&templates.at(c["template"].get<std::string>()), &c["variables"], &expected.back()});
  }

  size_t mismatches = 0, bytes = 0;
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = Clock::now();
    for (const Case& c : cases) {
      const auto out = c.tpl->render(*c.variables, options);
      if (rep == 0) {
        mismatches += out.text != *c.expected;
        bytes += out.text.size();
      }
    }
    best = std::min(best, seconds_since(start));
  }
  const double rate = static_cast<double>(cases.size()) / best;
  std::printf("ferry: %zu templates parsed in %.1f ms; %zu conversations (%.2f MB of text) in %.2f ms (best of %d) = "
              "%.0f conversations/s; %zu differ from transformers\n",
              templates.size(), parse_seconds * 1e3, cases.size(), static_cast<double>(bytes) / 1e6, best * 1e3, reps,
              rate, mismatches);
  std::printf("RESULT ferry_conversations_per_s %.6g\n", rate);
  std::printf("RESULT ferry_mismatches %zu\n", mismatches);
  std::printf("RESULT conversations %zu\n", cases.size());
  return mismatches == 0 ? 0 : 1;
}
