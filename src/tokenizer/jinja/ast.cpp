// Walking the parsed template's expressions (see ast.h).
#include "src/tokenizer/jinja/ast.h"

namespace ferry::jinja {
namespace {

void each_arg_slot(ArgExprs& a, const std::function<void(ExprPtr&)>& visit) {
  for (auto& p : a.positional) visit(p);
  for (auto& kv : a.keyword) visit(kv.second);
  visit(a.star);
  visit(a.star_star);
}

}  // namespace

void for_each_child_slot(Expr& e, const std::function<void(ExprPtr&)>& slot) {
  auto visit = [&](ExprPtr& p) {
    if (p) slot(p);
  };
  switch (e.kind) {
    case ExprKind::literal:
    case ExprKind::name: return;
    case ExprKind::list:
    case ExprKind::tuple:
      for (auto& p : static_cast<SeqExpr&>(e).items) visit(p);
      return;
    case ExprKind::dict:
      for (auto& [key, value] : static_cast<DictExpr&>(e).items) visit(key), visit(value);
      return;
    case ExprKind::attr: visit(static_cast<AttrExpr&>(e).object); return;
    case ExprKind::item: visit(static_cast<ItemExpr&>(e).object), visit(static_cast<ItemExpr&>(e).key); return;
    case ExprKind::slice: {
      auto& s = static_cast<SliceExpr&>(e);
      visit(s.object), visit(s.start), visit(s.stop), visit(s.step);
      return;
    }
    case ExprKind::negate:
    case ExprKind::plus:
    case ExprKind::not_:
    case ExprKind::and_:
    case ExprKind::or_: visit(static_cast<LogicExpr&>(e).left), visit(static_cast<LogicExpr&>(e).right); return;
    case ExprKind::binary: visit(static_cast<BinaryExpr&>(e).left), visit(static_cast<BinaryExpr&>(e).right); return;
    case ExprKind::concat:
      for (auto& p : static_cast<ConcatExpr&>(e).parts) visit(p);
      return;
    case ExprKind::compare:
      visit(static_cast<CompareExpr&>(e).first);
      for (auto& r : static_cast<CompareExpr&>(e).rest) visit(r.second);
      return;
    case ExprKind::cond: {
      auto& c = static_cast<CondExpr&>(e);
      visit(c.test), visit(c.then), visit(c.otherwise);
      return;
    }
    case ExprKind::call:
      visit(static_cast<CallExpr&>(e).callee);
      each_arg_slot(static_cast<CallExpr&>(e).args, visit);
      return;
    case ExprKind::filter:
    case ExprKind::test:
      visit(static_cast<FilterExpr&>(e).operand);
      each_arg_slot(static_cast<FilterExpr&>(e).args, visit);
      return;
  }
}

void for_each_child(const Expr& e, const std::function<void(const Expr&)>& visit) {
  // The walk changes nothing: the slots are only read.
  for_each_child_slot(const_cast<Expr&>(e), [&](ExprPtr& child) { visit(*child); });
}

}  // namespace ferry::jinja
