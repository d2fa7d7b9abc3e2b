// The parsed template: expression and statement nodes, built by the parser and walked by the
// evaluator. Each node keeps the byte offset of its token in the (newline-normalised) source,
// for error messages. Filters and tests are resolved to their functions when parsed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/tokenizer/jinja/operators.h"
#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

class Evaluator;
struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

using FilterFn = Value (*)(Evaluator& ev, const Value& operand, const CallArgs& args);
using TestFn = bool (*)(Evaluator& ev, const Value& operand, const CallArgs& args);

enum class ExprKind : uint8_t {
  literal, name, list, tuple, dict, attr, item, slice, negate, plus, not_, and_, or_, binary, concat,
  compare, cond, call, filter, test
};

struct Expr {
  Expr(ExprKind k, uint32_t at) : kind(k), offset(at) {}
  virtual ~Expr() = default;
  ExprKind kind;
  uint32_t offset;
  uint32_t depth = 1;  // nesting below and including this node (bounded by the parser)
  bool has_slice = false;  // a slice somewhere below: jinja2's constant folding may apply (optimizer.h)
};

struct LiteralExpr : Expr {
  LiteralExpr(uint32_t at, Value v) : Expr(ExprKind::literal, at), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(uint32_t at, std::string n) : Expr(ExprKind::name, at), name(std::move(n)) {}
  std::string name;
};

// List and tuple displays.
struct SeqExpr : Expr {
  using Expr::Expr;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  using Expr::Expr;
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct AttrExpr : Expr {
  AttrExpr(uint32_t at, ExprPtr obj, std::string n) : Expr(ExprKind::attr, at), object(std::move(obj)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

struct ItemExpr : Expr {
  using Expr::Expr;
  ExprPtr object, key;
};

struct SliceExpr : Expr {
  using Expr::Expr;
  ExprPtr object, start, stop, step;  // missing bounds are null
};

// negate, plus, not_, and the short-circuit and_ / or_ (right is null for unary ones).
struct LogicExpr : Expr {
  using Expr::Expr;
  ExprPtr left, right;
};

struct BinaryExpr : Expr {
  BinaryExpr(uint32_t at, BinaryOp o) : Expr(ExprKind::binary, at), op(o) {}
  BinaryOp op;
  ExprPtr left, right;
};

struct ConcatExpr : Expr {
  using Expr::Expr;
  std::vector<ExprPtr> parts;
};

// a < b <= c: Python's chained comparison.
struct CompareExpr : Expr {
  using Expr::Expr;
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct CondExpr : Expr {
  using Expr::Expr;
  ExprPtr test, then, otherwise;  // otherwise may be null
};

struct ArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star, star_star;  // *args, **kwargs
};

struct CallExpr : Expr {
  using Expr::Expr;
  ExprPtr callee;
  ArgExprs args;
};

// `x | name(args)` and `x is name(args)`. The operand of the innermost filter of a filter block
// is null: it filters the block's text. fn is null for an unknown name the parser let through
// (inside an if, as jinja2 does): calling it is the error.
struct FilterExpr : Expr {
  using Expr::Expr;
  ExprPtr operand;
  std::string name;
  ArgExprs args;
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

enum class StmtKind : uint8_t {
  text, print, if_, for_, set, set_block, macro, call_block, filter_block, with, break_, continue_, generation
};

struct Stmt {
  Stmt(StmtKind k, uint32_t at) : kind(k), offset(at) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  uint32_t offset;
};

// An assignment target: a name, `ns.attr`, or a tuple of targets.
struct Target {
  enum class Form : uint8_t { name, attribute, tuple } form = Form::name;
  uint32_t offset = 0;
  std::string name, attr;
  std::vector<Target> items;
};

struct TextStmt : Stmt {
  TextStmt(uint32_t at, std::string t) : Stmt(StmtKind::text, at), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt : Stmt {
  PrintStmt(uint32_t at, ExprPtr e) : Stmt(StmtKind::print, at), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  using Stmt::Stmt;
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
};

struct ForStmt : Stmt {
  using Stmt::Stmt;
  Target target;
  ExprPtr iter, filter;  // filter: `for x in y if cond` (may be null)
  bool recursive = false;
  Body body, otherwise;
};

struct SetStmt : Stmt {
  using Stmt::Stmt;
  Target target;
  ExprPtr value;
};

// {% set x %}...{% endset %}, optionally {% set x | filter %}.
struct SetBlockStmt : Stmt {
  using Stmt::Stmt;
  Target target;
  ExprPtr filter;  // a FilterExpr chain whose innermost operand is null, or null
  Body body;
};

// A macro, or the body of a call block (the `caller` it passes).
struct MacroDef {
  std::string name;
  uint32_t offset = 0;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  bool catch_kwargs = false, catch_varargs = false, uses_caller = false;
};

struct MacroStmt : Stmt {
  using Stmt::Stmt;
  std::shared_ptr<MacroDef> def;
};

struct CallBlockStmt : Stmt {
  using Stmt::Stmt;
  ExprPtr call;  // a CallExpr
  std::shared_ptr<MacroDef> caller;
};

struct FilterBlockStmt : Stmt {
  using Stmt::Stmt;
  ExprPtr filter;  // a FilterExpr chain whose innermost operand is null
  Body body;
};

struct WithStmt : Stmt {
  using Stmt::Stmt;
  std::vector<std::pair<Target, ExprPtr>> bindings;
  Body body;
};

// {% generation %}: transformers' AssistantTracker marks the text of assistant turns.
struct BlockStmt : Stmt {
  using Stmt::Stmt;
  Body body;
};

// Calls `slot` with each direct sub-expression of `e` (not nested statement bodies), which it may
// replace; for_each_child only reads them.
void for_each_child_slot(Expr& e, const std::function<void(ExprPtr&)>& slot);
void for_each_child(const Expr& e, const std::function<void(const Expr&)>& visit);

}  // namespace ferry::jinja
