// Rendering a parsed template (see evaluator.h): statements, expressions, scopes, macros,
// loops, and the RenderLimits checks.
#include "src/tokenizer/jinja/evaluator.h"

#include <algorithm>

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/globals.h"
#include "src/tokenizer/jinja/json.h"
#include "src/tokenizer/jinja/methods.h"
#include "src/tokenizer/jinja/operators.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja/repr.h"
#include "src/tokenizer/jinja/filters.h"
#include "src/tokenizer/jinja/is_tests.h"

namespace ferry::jinja {
namespace {

class MacroObject : public Object {
 public:
  MacroObject(std::shared_ptr<const MacroDef> def, ScopePtr closure) : def_(std::move(def)), closure_(std::move(closure)) {}
  std::string_view type_name() const override { return "Macro"; }
  bool callable() const override { return true; }
  Value call(Evaluator& ev, CallArgs& args) override {
    if (!closure_) throw Failure("macro '" + def_->name + "' called after the render ended");
    return ev.call_macro(*def_, closure_, args);
  }
  Value attribute(std::string_view name) const override {
    if (name == "name") return Value::string(def_->name);
    if (name == "arguments") {
      std::vector<Value> names;
      for (const auto& param : def_->params) names.push_back(Value::string(param.first));
      return make_tuple(std::move(names));
    }
    if (name == "catch_kwargs") return Value::boolean(def_->catch_kwargs);
    if (name == "catch_varargs") return Value::boolean(def_->catch_varargs);
    if (name == "caller") return Value::boolean(def_->uses_caller);
    return Value();
  }
  std::string repr() const override { return "<Macro " + repr_string(def_->name) + ">"; }
  void clear() override { closure_.reset(); }

 private:
  std::shared_ptr<const MacroDef> def_;
  ScopePtr closure_;
};

// jinja2's LoopContext: the `loop` variable of a for loop.
class LoopObject : public Object {
 public:
  // `items` is a list value (shared, never copied item by item).
  LoopObject(Value items, int depth, const ForStmt* stmt, ScopePtr scope)
      : items_(std::move(items)), depth_(depth), stmt_(stmt), scope_(std::move(scope)) {}
  std::string_view type_name() const override { return "LoopContext"; }
  bool callable() const override { return true; }
  Value call(Evaluator& ev, CallArgs& args) override {
    if (!stmt_->recursive) throw Failure("TypeError: The loop must have the 'recursive' marker to be called recursively.");
    if (args.positional.size() != 1 || !args.keyword.empty()) throw Failure("TypeError: loop() takes exactly one argument");
    if (!scope_) throw Failure("loop called after the render ended");
    return ev.call_loop(*stmt_, scope_, args.positional[0], depth_ + 1);
  }
  Value attribute(std::string_view name) const override;
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index_ + 1) + "/" + std::to_string(items().size()) + ">";
  }
  void clear() override {
    items_ = Value::make_list({});
    scope_.reset();
    last_changed_ = Value();
  }
  void at(size_t index) { index_ = index; }

 private:
  static Value cycle(Evaluator&, const Value& self, const CallArgs& args) {
    const auto& loop = static_cast<const LoopObject&>(self.object());
    if (args.positional.empty()) throw Failure("TypeError: no items for cycling given");
    return args.positional[loop.index_ % args.positional.size()];
  }
  static Value changed(Evaluator&, const Value& self, const CallArgs& args) {
    auto& loop = static_cast<LoopObject&>(self.object());
    const Value current = make_tuple(args.positional);
    if (loop.has_changed_value_ && equals(loop.last_changed_, current)) return Value::boolean(false);
    loop.last_changed_ = current;
    loop.has_changed_value_ = true;
    return Value::boolean(true);
  }

  const std::vector<Value>& items() const { return items_.list().items; }

  Value items_;
  size_t index_ = 0;
  int depth_;
  const ForStmt* stmt_;
  ScopePtr scope_;
  Value last_changed_;
  bool has_changed_value_ = false;
};

Value LoopObject::attribute(std::string_view name) const {
  const std::vector<Value>& items = this->items();
  const auto n = static_cast<int64_t>(items.size()), i = static_cast<int64_t>(index_);
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(depth_);
  if (name == "depth0") return Value::integer(depth_ - 1);
  if (name == "previtem") return i > 0 ? items[index_ - 1] : Value::undefined_hint("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? items[index_ + 1] : Value::undefined_hint("there is no next item");
  if (name == "cycle" || name == "changed") {
    const Value self = Value::make_object(std::const_pointer_cast<Object>(shared_from_this()));
    return Value::make_object(std::make_shared<BuiltinFunction>(name == "cycle" ? "cycle" : "changed",
                                                                name == "cycle" ? cycle : changed, self));
  }
  return Value();
}

struct DepthGuard {
  explicit DepthGuard(int& depth, int limit) : d(depth) {
    if (++d > limit) {
      --d;
      throw Failure("calls nested deeper than max_depth (" + std::to_string(limit) + ")", ErrorKind::limit);
    }
  }
  ~DepthGuard() { --d; }
  int& d;
};

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (size_t i = 0; i < inline_count_; ++i) {
    if (inline_[i].first == name) return &inline_[i].second;
  }
  for (const auto& [key, value] : more_) {
    if (key == name) return &value;
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  if (const Value* existing = find(name)) {
    *const_cast<Value*>(existing) = std::move(v);
  } else if (inline_count_ < kInline) {
    inline_[inline_count_++] = {name, std::move(v)};
  } else {
    more_.emplace_back(name, std::move(v));
  }
}

void Scope::clear() {
  for (size_t i = 0; i < inline_count_; ++i) inline_[i].second = Value();
  inline_count_ = 0;
  more_.clear();
}

Evaluator::Evaluator(const Program& program, const RenderOptions& options) : program_(program), options_(options) {}

Evaluator::~Evaluator() {
  for (const auto& weak : tracked_) {
    if (auto object = weak.lock()) object->clear();
  }
}

RenderResult Evaluator::render(const nlohmann::ordered_json& variables) {
  stack_base_ = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  try {
    if (!variables.is_object()) throw Failure("the render variables must be a JSON object");
    const Value vars = from_json(variables);
    variables_ = vars.dict_ptr();
    root_.reserve(4096);
    exec_body(program_.body, std::make_shared<Scope>(nullptr));
  } catch (const Failure& failure) {
    rethrow_at(failure, 0);
  }
  RenderResult result;
  result.generation_spans = byte_spans();
  result.text = std::move(root_);
  return result;
}

void Evaluator::charge(uint64_t steps) {
  steps_ += steps;
  if (steps_ > limits().max_steps) {
    throw Failure("the template ran more than max_steps (" + std::to_string(limits().max_steps) +
                      " loop iterations, calls and items)",
                  ErrorKind::limit);
  }
}

void Evaluator::check_size(uint64_t bytes) {
  if (bytes > limits().max_output_bytes) {
    throw Failure("a string of " + std::to_string(bytes) + " bytes is over max_output_bytes (" +
                      std::to_string(limits().max_output_bytes) + ")",
                  ErrorKind::limit);
  }
}

void Evaluator::write(std::string_view text) {
  if (out_->size() + text.size() > limits().max_output_bytes) {
    throw Failure("the rendered text is over max_output_bytes (" + std::to_string(limits().max_output_bytes) + ")",
                  ErrorKind::limit);
  }
  out_->append(text);
}

template <class Fn>
std::string Evaluator::capture(Fn&& body) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    body();
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

void Evaluator::stack_exhausted() const {
  throw Failure("the template nests statements and calls too deeply (max_stack_bytes)", ErrorKind::limit);
}

void Evaluator::rethrow_at(const Failure& failure, uint32_t offset) const {
  const SourcePosition pos = position_of(program_.source, offset);
  throw TemplateError(failure.kind(), program_.name, pos.line, pos.column, failure.what());
}

std::tm Evaluator::now() const {
  std::tm tm{};
  if (options_.now) {
    tm = *options_.now;
    std::tm normalised = tm;
    timegm(&normalised);  // fills in the weekday and day of the year from the date
    tm.tm_wday = normalised.tm_wday;
    tm.tm_yday = normalised.tm_yday;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  return tm;
}

void Evaluator::track(const std::shared_ptr<Object>& object) {
  tracked_.push_back(object);
  if (tracked_.size() >= tracked_pruned_at_) {
    tracked_.erase(std::remove_if(tracked_.begin(), tracked_.end(), [](const auto& w) { return w.expired(); }),
                   tracked_.end());
    tracked_pruned_at_ = std::max<size_t>(64, tracked_.size() * 2);
  }
}

// --- statements ------------------------------------------------------------------------------

Evaluator::Flow Evaluator::exec_body(const Body& body, const ScopePtr& scope) {
  for (const auto& s : body) {
    const Flow flow = exec(*s, scope);
    if (flow != Flow::normal) return flow;
  }
  return Flow::normal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, const ScopePtr& scope) {
  check_stack();
  try {
    return exec_impl(s, scope);
  } catch (const Failure& failure) {
    rethrow_at(failure, s.offset);
  }
}

Evaluator::Flow Evaluator::exec_impl(const Stmt& s, const ScopePtr& scope) {
  switch (s.kind) {
    case StmtKind::text: write(static_cast<const TextStmt&>(s).text); break;
    case StmtKind::print: {
      const Value v = eval(*static_cast<const PrintStmt&>(s).expr, scope);
      if (v.is_string()) {
        write(v.str());
      } else {
        write(to_str(v));
      }
      break;
    }
    case StmtKind::if_: {
      const auto& node = static_cast<const IfStmt&>(s);
      for (const auto& [test, body] : node.branches) {
        if (truthy(eval(*test, scope))) return exec_body(body, scope);
      }
      return exec_body(node.otherwise, scope);
    }
    case StmtKind::for_: return exec_for(static_cast<const ForStmt&>(s), scope);
    case StmtKind::set: {
      const auto& node = static_cast<const SetStmt&>(s);
      assign(node.target, eval(*node.value, scope), scope);
      break;
    }
    case StmtKind::set_block: return exec_set_block(static_cast<const SetBlockStmt&>(s), scope);
    case StmtKind::macro: {
      const auto& def = static_cast<const MacroStmt&>(s).def;
      scope->set(def->name, define_macro(def, scope));
      break;
    }
    case StmtKind::call_block: return exec_call_block(static_cast<const CallBlockStmt&>(s), scope);
    case StmtKind::filter_block: return exec_filter_block(static_cast<const FilterBlockStmt&>(s), scope);
    case StmtKind::with: return exec_with(static_cast<const WithStmt&>(s), scope);
    case StmtKind::break_: return Flow::break_;
    case StmtKind::continue_: return Flow::continue_;
    case StmtKind::generation: return exec_generation(static_cast<const BlockStmt&>(s), scope);
  }
  return Flow::normal;
}

Value Evaluator::define_macro(const std::shared_ptr<const MacroDef>& def, const ScopePtr& scope) {
  auto macro = std::make_shared<MacroObject>(def, scope);
  track(macro);
  return Value::make_object(std::move(macro));
}

Evaluator::Flow Evaluator::exec_for(const ForStmt& s, const ScopePtr& scope) {
  const Value iterable = eval(*s.iter, scope);
  charge(1);
  return run_loop(s, item_list(iterable), scope, 1);
}

// What a loop goes through, as a list value: a list as it is (items are not copied one by one),
// anything else listed.
Value Evaluator::item_list(const Value& iterable) {
  if (iterable.is_list()) {
    charge(iterable.list().items.size());
    return iterable;
  }
  return Value::make_list(iterate(*this, iterable));
}

Evaluator::Flow Evaluator::run_loop(const ForStmt& s, Value list, const ScopePtr& scope, int depth) {
  if (s.filter) {  // `for x in xs if cond`: filtered first, so loop.length counts what is left
    std::vector<Value> kept;
    for (const Value& item : list.list().items) {
      auto test_scope = std::make_shared<Scope>(scope);
      assign(s.target, item, test_scope);
      if (truthy(eval(*s.filter, test_scope))) kept.push_back(item);
    }
    list = Value::make_list(std::move(kept));
  }
  const std::vector<Value>& items = list.list().items;
  if (items.empty()) return exec_body(s.otherwise, std::make_shared<Scope>(scope));
  auto loop = std::make_shared<LoopObject>(list, depth, &s, scope);
  track(loop);
  const Value loop_value = Value::make_object(loop);
  ScopePtr iteration;
  for (size_t i = 0; i < items.size(); ++i) {
    charge(1);
    loop->at(i);
    if (iteration && iteration.use_count() == 1) {
      iteration->clear();  // nothing kept the last iteration's scope (no macro defined in it)
    } else {
      iteration = std::make_shared<Scope>(scope);
    }
    assign(s.target, items[i], iteration);
    iteration->set("loop", loop_value);
    if (exec_body(s.body, iteration) == Flow::break_) break;
  }
  return Flow::normal;
}

Value Evaluator::call_loop(const ForStmt& loop, const ScopePtr& scope, const Value& iterable, int depth) {
  DepthGuard guard(call_depth_, limits().max_depth);
  Value items = item_list(iterable);
  return Value::string(capture([&] { run_loop(loop, std::move(items), scope, depth); }));
}

Evaluator::Flow Evaluator::exec_set_block(const SetBlockStmt& s, const ScopePtr& scope) {
  auto inner = std::make_shared<Scope>(scope);
  Flow flow = Flow::normal;
  Value text = Value::string(capture([&] { flow = exec_body(s.body, inner); }));
  if (flow != Flow::normal) return flow;
  if (s.filter) text = eval_filter(static_cast<const FilterExpr&>(*s.filter), inner, &text);
  assign(s.target, text, scope);
  return Flow::normal;
}

Evaluator::Flow Evaluator::exec_filter_block(const FilterBlockStmt& s, const ScopePtr& scope) {
  auto inner = std::make_shared<Scope>(scope);
  Flow flow = Flow::normal;
  const Value text = Value::string(capture([&] { flow = exec_body(s.body, inner); }));
  if (flow != Flow::normal) return flow;
  write(to_str(eval_filter(static_cast<const FilterExpr&>(*s.filter), inner, &text)));
  return Flow::normal;
}

Evaluator::Flow Evaluator::exec_call_block(const CallBlockStmt& s, const ScopePtr& scope) {
  const auto& call_expr = static_cast<const CallExpr&>(*s.call);
  const Value callee = eval(*call_expr.callee, scope);
  CallArgs args = eval_args(call_expr.args, scope);
  args.keyword.emplace_back("caller", define_macro(s.caller, scope));
  charge(1);
  write(to_str(call(callee, args)));
  return Flow::normal;
}

Evaluator::Flow Evaluator::exec_with(const WithStmt& s, const ScopePtr& scope) {
  auto inner = std::make_shared<Scope>(scope);
  std::vector<Value> values;
  for (const auto& binding : s.bindings) values.push_back(eval(*binding.second, scope));
  for (size_t i = 0; i < values.size(); ++i) assign(s.bindings[i].first, values[i], inner);
  return exec_body(s.body, inner);
}

// transformers' AssistantTracker records, in characters, (start, start + len(body)) where start
// is the length of the text rendered at the top level so far. Inside a macro or a captured block
// that is not where the body ends up; the span then says what transformers' does. Spans are kept
// in characters and turned into byte offsets of the final text when the render ends.
Evaluator::Flow Evaluator::exec_generation(const BlockStmt& s, const ScopePtr& scope) {
  auto inner = std::make_shared<Scope>(scope);
  counted_chars_ += pystr::length(std::string_view(root_).substr(counted_bytes_));
  counted_bytes_ = root_.size();
  const size_t start = counted_chars_;
  const size_t before = out_->size();
  const Flow flow = exec_body(s.body, inner);
  spans_.emplace_back(start, start + pystr::length(std::string_view(*out_).substr(before)));
  return flow;
}

std::vector<std::pair<size_t, size_t>> Evaluator::byte_spans() const {
  std::vector<size_t> offsets;  // byte offset of each character of the text, and its end
  if (!spans_.empty()) offsets = pystr::char_offsets(root_);
  auto byte_at = [&](size_t chars) { return offsets[std::min(chars, offsets.size() - 1)]; };
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& [begin, end] : spans_) out.emplace_back(byte_at(begin), byte_at(end));
  return out;
}

// --- expressions ---------------------------------------------------------------------------

std::optional<Value> Evaluator::fold(const Expr& e, bool printed) {
  static const auto no_variables = std::make_shared<const DictData>();
  stack_base_ = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  variables_ = no_variables;
  folding_ = true;
  std::optional<Value> v;
  try {
    v = eval_impl(e, std::make_shared<Scope>(nullptr));
  } catch (const Failure&) {
  } catch (const TemplateError&) {
  }
  folding_ = false;
  if (v && !printed && !has_safe_repr(*v)) v.reset();
  return v;
}

Value Evaluator::eval(const Expr& e, const ScopePtr& scope) {
  check_stack();
  try {
    return eval_impl(e, scope);
  } catch (const Failure& failure) {
    rethrow_at(failure, e.offset);
  }
}

Value Evaluator::eval_impl(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::literal: {
      // The template outlives the render, not the folding that may replace this node (optimizer.h).
      const Value& literal = static_cast<const LiteralExpr&>(e).value;
      if (!literal.is_string() || folding_) return literal;
      return Value::borrowed_string(literal.str(), literal.is_markup());
    }
    case ExprKind::name:
      if (folding_) throw Failure("not a constant");
      return lookup(static_cast<const NameExpr&>(e).name, scope.get());
    case ExprKind::list:
    case ExprKind::tuple: {
      const auto& items = static_cast<const SeqExpr&>(e).items;
      std::vector<Value> values;
      values.reserve(items.size());
      for (const auto& item : items) values.push_back(eval(*item, scope));
      charge(values.size());
      return Value::make_list(std::move(values), e.kind == ExprKind::tuple ? ListFlavor::tuple : ListFlavor::list);
    }
    case ExprKind::dict: return eval_dict(static_cast<const DictExpr&>(e), scope);
    case ExprKind::attr: {
      const auto& node = static_cast<const AttrExpr&>(e);
      return get_attr(eval(*node.object, scope), node.name);
    }
    case ExprKind::item: {
      const auto& node = static_cast<const ItemExpr&>(e);
      const Value object = eval(*node.object, scope);
      return get_item(object, eval(*node.key, scope));
    }
    case ExprKind::slice: {
      const auto& node = static_cast<const SliceExpr&>(e);
      const Value object = eval(*node.object, scope);
      auto bound = [&](const ExprPtr& p) { return p ? eval(*p, scope) : Value::none(); };
      const Value start = bound(node.start), stop = bound(node.stop), step = bound(node.step);
      if (!folding_) return get_slice(object, start, stop, step);
      try {
        return get_slice(object, start, stop, step);
      } catch (const Failure& failure) {
        // Folding (optimizer.h) slices through jinja2's getitem, which swallows a TypeError (not an
        // Undefined's own error, not a ValueError).
        if (object.is_undefined() || std::string_view(failure.what()).rfind("TypeError", 0) != 0) throw;
        return Value::undefined_attribute(object, "slice");
      }
    }
    case ExprKind::negate: return negate(eval(*static_cast<const LogicExpr&>(e).left, scope));
    case ExprKind::plus: return unary_plus(eval(*static_cast<const LogicExpr&>(e).left, scope));
    case ExprKind::not_: return Value::boolean(!truthy(eval(*static_cast<const LogicExpr&>(e).left, scope)));
    case ExprKind::and_:
    case ExprKind::or_: {
      const auto& node = static_cast<const LogicExpr&>(e);
      Value left = eval(*node.left, scope);
      if (truthy(left) == (e.kind == ExprKind::or_)) return left;
      return eval(*node.right, scope);
    }
    case ExprKind::binary: {
      const auto& node = static_cast<const BinaryExpr&>(e);
      const Value left = eval(*node.left, scope);
      const Value right = eval(*node.right, scope);
      return arithmetic(*this, node.op, left, right);
    }
    case ExprKind::concat: return eval_concat(static_cast<const ConcatExpr&>(e), scope);
    case ExprKind::compare: return eval_compare(static_cast<const CompareExpr&>(e), scope);
    case ExprKind::cond: return eval_cond(static_cast<const CondExpr&>(e), scope);
    case ExprKind::call: {
      if (folding_) throw Failure("not a constant");
      const auto& node = static_cast<const CallExpr&>(e);
      const Value callee = eval(*node.callee, scope);
      CallArgs args = eval_args(node.args, scope);
      charge(1);
      return call(callee, args);
    }
    case ExprKind::filter: return eval_filter(static_cast<const FilterExpr&>(e), scope, nullptr);
    case ExprKind::test: {
      const auto& node = static_cast<const FilterExpr&>(e);
      const Value operand = eval(*node.operand, scope);
      const CallArgs args = eval_args(node.args, scope);
      if (!node.test) throw Failure("unknown test '" + node.name + "'");
      charge(1);
      return Value::boolean(node.test(*this, operand, args));
    }
  }
  return Value();
}

Value Evaluator::eval_dict(const DictExpr& e, const ScopePtr& scope) {
  auto dict = std::make_shared<DictData>();
  dict->reserve(e.items.size());
  for (const auto& [key, value] : e.items) {
    Value k = eval(*key, scope);
    dict->set(std::move(k), eval(*value, scope));
  }
  charge(e.items.size());
  return Value::make_dict(std::move(dict));
}

Value Evaluator::eval_concat(const ConcatExpr& e, const ScopePtr& scope) {
  std::string out;
  for (const auto& part : e.parts) {
    append_str(out, eval(*part, scope));
    check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value Evaluator::eval_compare(const CompareExpr& e, const ScopePtr& scope) {
  Value left = eval(*e.first, scope);
  for (const auto& [op, expr] : e.rest) {
    Value right = eval(*expr, scope);
    if (!compare(*this, op, left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Evaluator::eval_cond(const CondExpr& e, const ScopePtr& scope) {
  if (truthy(eval(*e.test, scope))) return eval(*e.then, scope);
  if (e.otherwise) return eval(*e.otherwise, scope);
  if (folding_) throw Failure("not a constant");
  const SourcePosition pos = position_of(program_.source, e.offset);
  return Value::undefined_hint("the inline if-expression on line " + std::to_string(pos.line) +
                               " evaluated to false and no else section was defined.");
}

Value Evaluator::eval_filter(const FilterExpr& e, const ScopePtr& scope, const Value* block_text) {
  Value operand;
  if (!e.operand && !block_text) {
    throw Failure("not a constant");  // a filter block's chain, met while folding
  } else if (!e.operand) {
    operand = *block_text;
  } else if (block_text) {  // an outer filter of a filter block's chain
    operand = eval_filter(static_cast<const FilterExpr&>(*e.operand), scope, block_text);
  } else {
    operand = eval(*e.operand, scope);
  }
  const CallArgs args = eval_args(e.args, scope);
  if (!e.filter) throw Failure("unknown filter '" + e.name + "'");
  if (folding_ && filter_needs_context(e.name)) throw Failure("not a constant");
  charge(1);
  try {
    return e.filter(*this, operand, args);
  } catch (const Failure& failure) {
    rethrow_at(failure, e.offset);
  }
}

CallArgs Evaluator::eval_args(const ArgExprs& a, const ScopePtr& scope) {
  CallArgs args;
  args.positional.reserve(a.positional.size());
  args.keyword.reserve(a.keyword.size());
  for (const auto& p : a.positional) args.positional.push_back(eval(*p, scope));
  if (a.star) {
    for (Value& v : iterate(*this, eval(*a.star, scope))) args.positional.push_back(std::move(v));
  }
  for (const auto& [key, value] : a.keyword) args.keyword.emplace_back(key, eval(*value, scope));
  if (a.star_star) {
    const Value extra = eval(*a.star_star, scope);
    if (!extra.is_dict()) throw Failure("TypeError: argument after ** must be a mapping, not " + type_name(extra));
    for (const auto& [key, value] : extra.dict().items()) {
      if (!key.is_string()) throw Failure("TypeError: keywords must be strings");
      args.keyword.emplace_back(key.str(), value);
    }
  }
  return args;
}

Value Evaluator::lookup(std::string_view name, const Scope* scope) const {
  for (const Scope* s = scope; s; s = s->parent.get()) {
    if (const Value* v = s->find(name)) return *v;
  }
  if (const Value* v = variables_->find(name)) return *v;
  if (const Value* v = builtin_global(name)) return *v;
  return Value::undefined_name(name);
}

void Evaluator::assign(const Target& target, const Value& value, const ScopePtr& scope) {
  switch (target.form) {
    case Target::Form::name: scope->set(target.name, value); return;
    case Target::Form::attribute: {
      const Value ns = lookup(target.name, scope.get());
      auto* object = ns.is_object() ? dynamic_cast<NamespaceObject*>(&ns.object()) : nullptr;
      if (!object) throw Failure("TemplateRuntimeError: cannot assign attribute on non-namespace object");
      object->set(target.attr, value);
      return;
    }
    case Target::Form::tuple: {
      const std::vector<Value> items = iterate(*this, value);
      const size_t want = target.items.size();
      if (items.size() > want) throw Failure("ValueError: too many values to unpack (expected " + std::to_string(want) + ")");
      if (items.size() < want) {
        throw Failure("ValueError: not enough values to unpack (expected " + std::to_string(want) + ", got " +
                      std::to_string(items.size()) + ")");
      }
      for (size_t i = 0; i < want; ++i) assign(target.items[i], items[i], scope);
      return;
    }
  }
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.is_object() && callee.object().callable()) return callee.object().call(*this, args);
  if (callee.is_undefined()) fail_undefined(callee);
  throw Failure("TypeError: '" + type_name(callee) + "' object is not callable");
}

Value Evaluator::call_filter(std::string_view name, const Value& operand, const CallArgs& args) {
  const FilterFn filter = find_filter(name);
  if (!filter) throw Failure("TemplateRuntimeError: No filter named '" + std::string(name) + "'.");
  charge(1);
  return filter(*this, operand, args);
}

bool Evaluator::call_test(std::string_view name, const Value& operand, const CallArgs& args) {
  const TestFn test = find_test(name);
  if (!test) throw Failure("TemplateRuntimeError: No test named '" + std::string(name) + "'.");
  charge(1);
  return test(*this, operand, args);
}

Value Evaluator::call_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args) {
  DepthGuard guard(call_depth_, limits().max_depth);
  auto scope = std::make_shared<Scope>(closure);
  const size_t n = def.params.size();
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < n && i < args.positional.size(); ++i) {
    scope->set(def.params[i].first, args.positional[i]);
    given[i] = true;
  }
  auto take_keyword = [&](std::string_view name) -> std::optional<Value> {
    for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
      if (it->first == name) {
        Value v = std::move(it->second);
        args.keyword.erase(it);
        return v;
      }
    }
    return std::nullopt;
  };
  if (args.positional.size() < n) {
    for (size_t i = args.positional.size(); i < n; ++i) {
      if (auto v = take_keyword(def.params[i].first)) scope->set(def.params[i].first, std::move(*v)), given[i] = true;
    }
  }
  const bool explicit_caller = std::any_of(def.params.begin(), def.params.end(), [](const auto& p) { return p.first == "caller"; });
  if (def.uses_caller && !explicit_caller) {
    auto caller = take_keyword("caller");
    scope->set("caller", caller ? *caller : Value::undefined_hint("No caller defined"));
  }
  if (def.catch_kwargs) {
    auto kwargs = std::make_shared<DictData>();
    for (auto& [key, value] : args.keyword) kwargs->set(Value::string(key), std::move(value));
    scope->set("kwargs", Value::make_dict(std::move(kwargs)));
  } else if (!args.keyword.empty()) {
    throw Failure("TypeError: macro " + repr_string(def.name) + " takes no keyword argument " +
                  repr_string(args.keyword.front().first));
  }
  if (def.catch_varargs) {
    std::vector<Value> rest;
    for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->set("varargs", make_tuple(std::move(rest)));
  } else if (args.positional.size() > n) {
    throw Failure("TypeError: macro " + repr_string(def.name) + " takes not more than " + std::to_string(n) +
                  " argument(s)");
  }
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    const auto& [name, fallback] = def.params[i];
    scope->set(name, fallback ? eval(*fallback, scope)
                              : Value::undefined_hint("parameter " + repr_string(name) + " was not provided"));
  }
  return Value::string(capture([&] { exec_body(def.body, scope); }));
}

}  // namespace ferry::jinja
