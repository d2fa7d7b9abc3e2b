// Rendering a parsed template: statements write text, expressions compute values, with jinja2's
// scoping (a for-loop iteration, macro call, call/filter/set block or with is a new scope whose
// parent is where it was written; `if` is not a scope; macros see the variables of the scope
// they were defined in, as Python closures do), and the RenderLimits bounds checked as it goes.
// Filters, tests, methods and objects call back into the Evaluator for callables, the budget and
// the clock.
#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/tokenizer/jinja/ast.h"
#include "src/tokenizer/jinja/template.h"
#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

// What Template holds: the normalised source (for error positions), its name and the tree.
struct Program {
  std::string source;
  std::string name;
  Body body;
};

// Variables of one scope, looked up innermost first. Names are views of the template's own text
// (targets, parameters) or of literals ("loop", "caller"): they outlive every render.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
  const Value* find(std::string_view name) const;
  void set(std::string_view name, Value v);
  void clear();

  std::shared_ptr<Scope> parent;

 private:
  // Most scopes hold a loop target and `loop`, or a macro's few parameters: those stay inline.
  static constexpr size_t kInline = 4;
  std::array<std::pair<std::string_view, Value>, kInline> inline_;
  size_t inline_count_ = 0;
  std::vector<std::pair<std::string_view, Value>> more_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Evaluator {
 public:
  Evaluator(const Program& program, const RenderOptions& options);
  ~Evaluator();  // clears the objects that could hold reference cycles (macros, namespaces, loops)
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  RenderResult render(const nlohmann::ordered_json& variables);

  // --- for filters, tests, methods and objects ---
  const RenderLimits& limits() const { return options_.limits; }
  void charge(uint64_t steps);         // throws Failure(limit) past max_steps
  void check_size(uint64_t bytes);     // throws Failure(limit) for a string past max_output_bytes
  Value call(const Value& callee, CallArgs& args);
  Value call_filter(std::string_view name, const Value& operand, const CallArgs& args);
  bool call_test(std::string_view name, const Value& operand, const CallArgs& args);
  std::tm now() const;
  // Objects that may end up in a reference cycle are cleared when the render ends.
  void track(const std::shared_ptr<Object>& object);

  // --- for the optimizer (optimizer.h) ---
  // `e` evaluated as jinja2's compiler folds constants: without variables, calls or filters that
  // need the render context (nullopt then, or when it fails), slices of what cannot be sliced
  // giving Undefined. Unless `printed`, only plain data counts (jinja2's has_safe_repr).
  std::optional<Value> fold(const Expr& e, bool printed);

  // --- for macro and loop objects ---
  Value call_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args);
  Value call_loop(const ForStmt& loop, const ScopePtr& scope, const Value& iterable, int depth);

 private:
  enum class Flow : uint8_t { normal, break_, continue_ };

  Flow exec_body(const Body& body, const ScopePtr& scope);
  Flow exec(const Stmt& s, const ScopePtr& scope);
  Flow exec_impl(const Stmt& s, const ScopePtr& scope);
  Flow exec_for(const ForStmt& s, const ScopePtr& scope);
  Flow run_loop(const ForStmt& s, Value list, const ScopePtr& scope, int depth);
  Value item_list(const Value& iterable);
  Flow exec_set_block(const SetBlockStmt& s, const ScopePtr& scope);
  Flow exec_filter_block(const FilterBlockStmt& s, const ScopePtr& scope);
  Flow exec_call_block(const CallBlockStmt& s, const ScopePtr& scope);
  Flow exec_with(const WithStmt& s, const ScopePtr& scope);
  Flow exec_generation(const BlockStmt& s, const ScopePtr& scope);
  std::vector<std::pair<size_t, size_t>> byte_spans() const;
  Value define_macro(const std::shared_ptr<const MacroDef>& def, const ScopePtr& scope);

  Value eval(const Expr& e, const ScopePtr& scope);

  Value eval_impl(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const CompareExpr& e, const ScopePtr& scope);
  Value eval_concat(const ConcatExpr& e, const ScopePtr& scope);
  Value eval_dict(const DictExpr& e, const ScopePtr& scope);
  Value eval_cond(const CondExpr& e, const ScopePtr& scope);
  Value eval_filter(const FilterExpr& e, const ScopePtr& scope, const Value* block_text);
  CallArgs eval_args(const ArgExprs& args, const ScopePtr& scope);
  Value lookup(std::string_view name, const Scope* scope) const;
  void assign(const Target& target, const Value& value, const ScopePtr& scope);

  void write(std::string_view text);
  // Runs `body` into a string of its own instead of the output.
  template <class Fn>
  std::string capture(Fn&& body);
  // Throws Failure(limit) once nested evaluation has used max_stack_bytes of the native stack.
  void check_stack() const {
    const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    if (here < stack_base_ && stack_base_ - here > limits().max_stack_bytes) stack_exhausted();
  }
  [[noreturn]] void stack_exhausted() const;
  [[noreturn]] void rethrow_at(const Failure& failure, uint32_t offset) const;

  const Program& program_;
  const RenderOptions& options_;
  std::string root_;
  std::string* out_ = &root_;
  std::vector<std::pair<size_t, size_t>> spans_;  // {% generation %} spans, in characters
  size_t counted_bytes_ = 0, counted_chars_ = 0;    // characters in root_[0, counted_bytes_)
  std::shared_ptr<const DictData> variables_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  bool folding_ = false;  // evaluating as jinja2's compiler folds constants (see fold())
  uintptr_t stack_base_ = 0;  // render()'s frame (the stack grows down)
  std::vector<std::weak_ptr<Object>> tracked_;
  size_t tracked_pruned_at_ = 64;
};

}  // namespace ferry::jinja
