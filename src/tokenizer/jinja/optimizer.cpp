// jinja2's constant folding of expressions holding slices (see optimizer.h).
#include "src/tokenizer/jinja/optimizer.h"

#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {
namespace {

RenderOptions folding_budget() {
  // Shared by every expression of one template: folding hostile source stays cheap.
  RenderOptions options;
  options.limits.max_steps = 1'000'000;
  options.limits.max_output_bytes = size_t{1} << 20;
  options.limits.max_depth = 16;
  return options;
}

class Folder {
 public:
  Folder() : options_(folding_budget()), evaluator_(program_, options_) {}

  void body(Body& statements) {
    for (StmtPtr& s : statements) statement(s);
  }

 private:
  void macro(MacroDef& def) {
    for (auto& param : def.params) expression(param.second);
    body(def.body);
  }

  void statement(StmtPtr& s) {
    switch (s->kind) {
      case StmtKind::print: {
        ExprPtr& e = static_cast<PrintStmt&>(*s).expr;
        if (!e->has_slice) return;
        if (auto v = evaluator_.fold(*e, true)) {
          s = std::make_unique<TextStmt>(s->offset, to_str(*v));
          return;
        }
        expression(e);
        return;
      }
      case StmtKind::if_:
        for (auto& [test, branch] : static_cast<IfStmt&>(*s).branches) expression(test), body(branch);
        body(static_cast<IfStmt&>(*s).otherwise);
        return;
      case StmtKind::for_: {
        auto& f = static_cast<ForStmt&>(*s);
        expression(f.iter), expression(f.filter), body(f.body), body(f.otherwise);
        return;
      }
      case StmtKind::set: expression(static_cast<SetStmt&>(*s).value); return;
      case StmtKind::set_block: expression(static_cast<SetBlockStmt&>(*s).filter), body(static_cast<SetBlockStmt&>(*s).body); return;
      case StmtKind::macro: macro(*static_cast<MacroStmt&>(*s).def); return;
      case StmtKind::call_block: expression(static_cast<CallBlockStmt&>(*s).call), macro(*static_cast<CallBlockStmt&>(*s).caller); return;
      case StmtKind::filter_block:
        expression(static_cast<FilterBlockStmt&>(*s).filter), body(static_cast<FilterBlockStmt&>(*s).body);
        return;
      case StmtKind::with:
        for (auto& binding : static_cast<WithStmt&>(*s).bindings) expression(binding.second);
        body(static_cast<WithStmt&>(*s).body);
        return;
      case StmtKind::generation: body(static_cast<BlockStmt&>(*s).body); return;
      default: return;
    }
  }

  // The whole expression if it folds, else each part that does (jinja2's optimizer works top
  // down the same way when it compiles).
  void expression(ExprPtr& e) {
    if (!e || !e->has_slice) return;
    if (auto v = evaluator_.fold(*e, false)) {
      e = std::make_unique<LiteralExpr>(e->offset, std::move(*v));
      return;
    }
    for_each_child_slot(*e, [&](ExprPtr& child) { expression(child); });
  }

  Program program_;
  RenderOptions options_;
  Evaluator evaluator_;
};

}  // namespace

void fold_constant_slices(Body& body) { Folder().body(body); }

}  // namespace ferry::jinja
