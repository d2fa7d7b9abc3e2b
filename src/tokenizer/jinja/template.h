// A torch-free Jinja renderer for chat templates: it renders a Hugging Face chat template as
// transformers' apply_chat_template(..., tokenize=False) does, byte for byte. That is jinja2's
// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols extension
// and transformers' additions: the {% generation %} block (AssistantTracker), the tojson filter
// (json.dumps with ensure_ascii=False), raise_exception() and strftime_now(), and its dict() and
// namespace() globals. Values behave as Python's (see value.h); see configs/templates/README.md
// for what is supported.
//
// Templates come from downloaded model folders, so they are untrusted: rendering reads no files
// or environment, and every render is bounded by RenderLimits (output size, steps, recursion):
// a hostile template ends in a TemplateError, never a hang, a crash or exhausted memory.
//
//   auto tpl = ferry::jinja::Template::parse(source, "tokenizer_config.json chat_template");
//   auto out = tpl.render({{"messages", messages}, {"add_generation_prompt", true},
//                          {"bos_token", "<s>"}, {"eos_token", "</s>"}});
//   out.text  // the prompt; out.generation_spans: the assistant text {% generation %} marks
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/tokenizer/jinja/template_error.h"

namespace ferry::jinja {

struct RenderLimits {
  // The rendered text, and any one string or captured block the template builds on the way.
  size_t max_output_bytes = size_t{16} << 20;
  // Work: loop iterations, calls, and items that filters and operators go through.
  uint64_t max_steps = 10'000'000;
  // Nested macro calls and recursive loop calls.
  int max_depth = 256;
  // Native stack the renderer may use below render()'s frame (nested statements, expressions and
  // calls); lower it when rendering on a thread with a small stack.
  size_t max_stack_bytes = size_t{1} << 20;
};

struct RenderOptions {
  RenderLimits limits;
  // The clock strftime_now() reads; unset: the current local time.
  std::optional<std::tm> now;
};

struct RenderResult {
  std::string text;
  // Byte ranges [begin, end) of text that {% generation %} blocks wrote, in order (transformers'
  // AssistantTracker, which return_assistant_tokens_mask turns into a token mask).
  std::vector<std::pair<size_t, size_t>> generation_spans;
};

struct Program;

class Template {
 public:
  // Parses `source`; `source_name` prefixes error messages (e.g. "tokenizer_config.json
  // chat_template"). Throws TemplateError (ErrorKind::syntax).
  static Template parse(std::string_view source, std::string source_name);

  // Renders with `variables` (a JSON object: messages, tools, add_generation_prompt, bos_token,
  // ...) as the template's globals. Throws TemplateError. Safe to call from several threads.
  RenderResult render(const nlohmann::ordered_json& variables, const RenderOptions& options = {}) const;

  const std::string& source_name() const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace ferry::jinja
