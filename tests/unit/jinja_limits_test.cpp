// The Jinja renderer against hostile templates: every RenderLimits bound ends the render in a
// TemplateError (ErrorKind::limit) quickly and before memory runs out — runaway recursion, loops
// that would run for hours, string and list blow-ups, output floods, values nested without end —
// and the parser refuses source nested deeper than it can walk safely.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>

#include "src/tokenizer/jinja/template.h"

namespace ferry::jinja {
namespace {

using Clock = std::chrono::steady_clock;

// Renders `source` expecting a TemplateError of `kind`; returns its message.
std::string expect_error(const std::string& source, ErrorKind kind, const RenderLimits& limits = {}) {
  RenderOptions options;
  options.limits = limits;
  const auto start = Clock::now();
  std::string message;
  try {
    Template::parse(source, "hostile").render(nlohmann::ordered_json::object(), options);
    ADD_FAILURE() << "rendered without an error: " << source.substr(0, 200);
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    message = e.what();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(seconds, 20.0) << source.substr(0, 200);  // sanitizer builds are ~10x slower than release
  return message;
}

RenderLimits small_limits() {
  RenderLimits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  return limits;
}

TEST(JinjaLimits, EndlessMacroRecursionStopsAtMaxDepth) {
  const std::string endless = "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}";
  RenderLimits limits;
  limits.max_depth = 20;
  const std::string message = expect_error(endless, ErrorKind::limit, limits);
  EXPECT_NE(message.find("max_depth (20)"), std::string::npos) << message;
  // With the defaults, max_depth (256) or, in sanitizer builds whose frames are larger, the stack
  // budget ends it.
  const std::string by_default = expect_error(endless, ErrorKind::limit);
  EXPECT_TRUE(by_default.find("max_depth (256)") != std::string::npos ||
              by_default.find("max_stack_bytes") != std::string::npos)
      << by_default;
}

TEST(JinjaLimits, RecursionThroughCallBlocksAndRecursiveLoopsStops) {
  expect_error("{% macro r() %}{% call r() %}x{% endcall %}{{ caller() }}{% endmacro %}{{ r() }}", ErrorKind::limit);
  expect_error("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}", ErrorKind::limit);
}

TEST(JinjaLimits, DeepRecursionStopsAtTheStackBudget) {
  RenderLimits limits;
  limits.max_depth = 100000;
  limits.max_stack_bytes = 64 << 10;
  const std::string message = expect_error(
      "{% macro r(n) %}{% if true %}{% for i in [n] %}{{ r(i + 1) }}{% endfor %}{% endif %}{% endmacro %}{{ r(0) }}",
      ErrorKind::limit, limits);
  EXPECT_NE(message.find("max_stack_bytes"), std::string::npos) << message;
}

TEST(JinjaLimits, LongLoopsStopAtMaxSteps) {
  const std::string loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
  EXPECT_NE(expect_error(loops, ErrorKind::limit, small_limits()).find("max_steps"), std::string::npos);
  // The default budget (10 million steps) ends the same loops too.
  expect_error(loops, ErrorKind::limit);
}

TEST(JinjaLimits, FiltersChargeForTheItemsTheyWalk) {
  // Few loop iterations, but each joins a 100,000-item list.
  expect_error("{% set xs = range(100000) | list %}{% for i in range(1000) %}{{ xs | join | length }}{% endfor %}",
               ErrorKind::limit, small_limits());
}

TEST(JinjaLimits, StringRepetitionIsRefusedBeforeAllocating) {
  expect_error("{{ 'a' * 10 ** 9 }}", ErrorKind::limit);
  expect_error("{{ 'abc' * 9223372036854775807 }}", ErrorKind::limit);
  expect_error("{{ ('a' * 1000000) * 1000000 }}", ErrorKind::limit);
  expect_error("{{ [1, 2] * 10 ** 12 }}", ErrorKind::limit);
  expect_error("{{ 'x'.center(10 ** 12) }}{{ 'x' | indent(10 ** 12) }}", ErrorKind::limit);
}

TEST(JinjaLimits, DoublingStringsAndListsStops) {
  expect_error("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
               ErrorKind::limit);
  expect_error("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
               ErrorKind::limit);
  expect_error("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
               ErrorKind::limit);
}

TEST(JinjaLimits, OutputFloodStopsAtMaxOutputBytes) {
  const std::string message =
      expect_error("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", ErrorKind::limit);
  EXPECT_NE(message.find("max_output_bytes"), std::string::npos) << message;
  // Captured text (macros, set blocks) is bounded as well.
  expect_error("{% set big %}{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}{% endset %}", ErrorKind::limit);
}

TEST(JinjaLimits, HugeRangesAreRefusedWithoutAllocating) {
  // jinja2's sandbox refuses ranges over 100,000 items (MAX_RANGE), as here.
  expect_error("{% for i in range(10 ** 12) %}{% endfor %}", ErrorKind::runtime);
  expect_error("{{ range(-9223372036854775807, 9223372036854775807) | length }}", ErrorKind::runtime);
}

TEST(JinjaLimits, ValuesNestedWithoutEndAreRefused) {
  expect_error("{% set ns = namespace(v=[]) %}{% for i in range(5000) %}{% set ns.v = [ns.v] %}{% endfor %}",
               ErrorKind::limit);
  expect_error("{% set ns = namespace(v={}) %}{% for i in range(5000) %}{% set ns.v = {'k': ns.v} %}{% endfor %}",
               ErrorKind::limit);
}

TEST(JinjaLimits, SelfReferencesDoNotLoopForever) {
  // A namespace that holds itself: printing it recurses until the depth bound.
  expect_error("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns }}", ErrorKind::limit);
  // jinja2: TypeError: Object of type TemplateNamespace is not JSON serializable.
  expect_error("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me | tojson }}", ErrorKind::type);
}

TEST(JinjaLimits, IntegersBeyond64BitsAreAnError) {
  // Python's ints have no bound; Ferry's are 64-bit and say so instead of wrapping around.
  expect_error("{{ 2 ** 64 }}", ErrorKind::runtime);
  expect_error("{{ 9223372036854775807 + 1 }}", ErrorKind::runtime);
  expect_error("{{ 99999999999999999999 }}", ErrorKind::syntax);
}

TEST(JinjaLimits, DeeplyNestedSourceIsASyntaxError) {
  expect_error("{{ " + std::string(10000, '(') + "1" + std::string(10000, ')') + " }}", ErrorKind::syntax);
  expect_error("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}", ErrorKind::syntax);
  expect_error("{{ " + std::string(5000, '-') + "1 }}", ErrorKind::syntax);
  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  expect_error(nots + "x }}", ErrorKind::syntax);
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  expect_error(chain + " }}", ErrorKind::syntax);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  expect_error(ifs, ErrorKind::syntax);
}

TEST(JinjaLimits, OrdinaryTemplatesStayWellInside) {
  RenderOptions options;
  options.limits = small_limits();
  const auto out = Template::parse("{% for i in range(1000) %}{{ i }},{% endfor %}", "ok")
                       .render(nlohmann::ordered_json::object(), options);
  EXPECT_EQ(out.text.substr(0, 6), "0,1,2,");
}

}  // namespace
}  // namespace ferry::jinja
