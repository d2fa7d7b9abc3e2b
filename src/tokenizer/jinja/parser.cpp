// jinja2's grammar (see parser.h). Function names follow jinja2/parser.py so the two can be read
// side by side.
#include "src/tokenizer/jinja/parser.h"

#include <algorithm>
#include <functional>
#include <initializer_list>

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/filters.h"
#include "src/tokenizer/jinja/is_tests.h"

namespace ferry::jinja {
namespace {

constexpr uint32_t kMaxExprDepth = 256;

using Names = std::initializer_list<std::string_view>;

// The parts of a statement: its expressions, and its bodies with whether each is a new frame
// (jinja2's frame.inner(): for bodies, macros, call/filter/set blocks, with) or shares this one.
struct StmtParts {
  std::vector<const Expr*> outer_exprs, inner_exprs;  // evaluated in this frame / the inner one
  std::vector<const Body*> same_frame, inner_frame;
};

StmtParts parts_of(const Stmt& s) {
  StmtParts p;
  switch (s.kind) {
    case StmtKind::print: p.outer_exprs.push_back(static_cast<const PrintStmt&>(s).expr.get()); break;
    case StmtKind::if_:
      for (const auto& [test, body] : static_cast<const IfStmt&>(s).branches) {
        p.outer_exprs.push_back(test.get());
        p.same_frame.push_back(&body);
      }
      p.same_frame.push_back(&static_cast<const IfStmt&>(s).otherwise);
      break;
    case StmtKind::for_: {
      const auto& f = static_cast<const ForStmt&>(s);
      p.outer_exprs.push_back(f.iter.get());
      if (f.filter) p.inner_exprs.push_back(f.filter.get());
      p.inner_frame = {&f.body, &f.otherwise};
      break;
    }
    case StmtKind::set: p.outer_exprs.push_back(static_cast<const SetStmt&>(s).value.get()); break;
    case StmtKind::set_block: {
      const auto& b = static_cast<const SetBlockStmt&>(s);
      if (b.filter) p.inner_exprs.push_back(b.filter.get());
      p.inner_frame.push_back(&b.body);
      break;
    }
    case StmtKind::macro: {
      const auto& def = *static_cast<const MacroStmt&>(s).def;
      for (const auto& param : def.params) {
        if (param.second) p.inner_exprs.push_back(param.second.get());
      }
      p.inner_frame.push_back(&def.body);
      break;
    }
    case StmtKind::call_block: {
      const auto& c = static_cast<const CallBlockStmt&>(s);
      p.outer_exprs.push_back(c.call.get());
      for (const auto& param : c.caller->params) {
        if (param.second) p.inner_exprs.push_back(param.second.get());
      }
      p.inner_frame.push_back(&c.caller->body);
      break;
    }
    case StmtKind::filter_block:
      p.inner_exprs.push_back(static_cast<const FilterBlockStmt&>(s).filter.get());
      p.inner_frame.push_back(&static_cast<const FilterBlockStmt&>(s).body);
      break;
    case StmtKind::with:
      for (const auto& binding : static_cast<const WithStmt&>(s).bindings) p.outer_exprs.push_back(binding.second.get());
      p.inner_frame.push_back(&static_cast<const WithStmt&>(s).body);
      break;
    case StmtKind::generation: p.inner_frame.push_back(&static_cast<const BlockStmt&>(s).body); break;
    default: break;
  }
  return p;
}

// Whether `body` loads any of `names` anywhere (nested macros included, as jinja2's
// find_undeclared looks): a macro that names `caller`, `varargs` or `kwargs` receives them.
void find_loads(const Body& body, std::vector<std::string>& found);

void find_loads_in(const Expr& e, std::vector<std::string>& found) {
  if (e.kind == ExprKind::name) found.push_back(static_cast<const NameExpr&>(e).name);
  for_each_child(e, [&](const Expr& child) { find_loads_in(child, found); });
}

void find_loads(const Body& body, std::vector<std::string>& found) {
  for (const auto& s : body) {
    const StmtParts p = parts_of(*s);
    for (const Expr* e : p.outer_exprs) find_loads_in(*e, found);
    for (const Expr* e : p.inner_exprs) find_loads_in(*e, found);
    for (const Body* b : p.same_frame) find_loads(*b, found);
    for (const Body* b : p.inner_frame) find_loads(*b, found);
  }
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body run() {
    Body body = subparse({});
    check_unknown(body, false);
    return body;
  }

 private:
  struct DepthGuard {
    DepthGuard(Parser& p, const Token& at) : parser(p) {
      if (++parser.depth_ > kMaxNesting) {
        parser.fail(at, "template nested deeper than " + std::to_string(kMaxNesting) + " levels");
      }
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // --- tokens ------------------------------------------------------------------------------
  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  static bool is_name(const Token& t, std::string_view v) { return t.type == TokenType::name && t.text == v; }
  static bool is_op(const Token& t, std::string_view v) { return t.type == TokenType::op && t.text == v; }
  bool skip_name(std::string_view v) {
    if (!is_name(cur(), v)) return false;
    advance();
    return true;
  }
  bool skip_op(std::string_view v) {
    if (!is_op(cur(), v)) return false;
    advance();
    return true;
  }

  [[noreturn]] void fail(const Token& at, const std::string& message) const { throw SyntaxFailure(at.offset, message); }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::data: return "template data";
      case TokenType::variable_begin: return "begin of print statement";
      case TokenType::variable_end: return "end of print statement";
      case TokenType::block_begin: return "begin of statement block";
      case TokenType::block_end: return "end of statement block";
      case TokenType::string: return "string";
      case TokenType::integer: return "integer";
      case TokenType::floating: return "float";
      case TokenType::eof: return "end of template";
      default: return "'" + t.text + "'";
    }
  }

  const Token& expect_op(std::string_view v) {
    if (!is_op(cur(), v)) fail(cur(), "expected token '" + std::string(v) + "', got " + describe(cur()));
    const Token& t = cur();
    advance();
    return t;
  }

  const Token& expect_name(std::string_view v = {}) {
    if (cur().type != TokenType::name || (!v.empty() && cur().text != v)) {
      fail(cur(), "expected " + (v.empty() ? std::string("a name") : "'" + std::string(v) + "'") + ", got " +
                      describe(cur()));
    }
    const Token& t = cur();
    advance();
    return t;
  }

  void expect(TokenType type) {
    if (cur().type != type) {
      fail(cur(), "expected " + describe(Token{type, 0, {}}) + ", got " + describe(cur()));
    }
    advance();
  }

  // --- statements ----------------------------------------------------------------------------
  static bool in(const Token& t, Names names) {
    if (t.type != TokenType::name) return false;
    for (std::string_view n : names) {
      if (t.text == n) return true;
    }
    return false;
  }

  // Statements until a block tag named in end_names (left as the current token) or the end.
  Body subparse(Names end_names) {
    DepthGuard guard(*this, cur());
    Body body;
    while (cur().type != TokenType::eof) {
      const Token& t = cur();
      if (t.type == TokenType::data) {
        body.push_back(std::make_unique<TextStmt>(t.offset, t.text));
        advance();
      } else if (t.type == TokenType::variable_begin) {
        advance();
        body.push_back(std::make_unique<PrintStmt>(t.offset, parse_tuple(false, true, {}, false)));
        expect(TokenType::variable_end);
      } else {
        advance();
        if (end_names.size() && in(cur(), end_names)) return body;
        parse_statement(body);
        expect(TokenType::block_end);
      }
    }
    return body;
  }

  Body parse_statements(Names end_names, bool drop_needle) {
    skip_op(":");
    expect(TokenType::block_end);
    Body body = subparse(end_names);
    if (cur().type == TokenType::eof) {
      std::string wanted;
      for (std::string_view n : end_names) wanted += (wanted.empty() ? "'" : " or '") + std::string(n) + "'";
      fail(cur(), "unexpected end of template: looking for " + wanted);
    }
    if (drop_needle) advance();
    return body;
  }

  void parse_statement(Body& body) {
    const Token& t = cur();
    if (t.type != TokenType::name) fail(t, "tag name expected");
    const std::string& tag = t.text;
    if (tag == "if") return body.push_back(parse_if());
    if (tag == "for") return body.push_back(parse_for());
    if (tag == "set") return body.push_back(parse_set());
    if (tag == "macro") return body.push_back(parse_macro());
    if (tag == "call") return body.push_back(parse_call_block());
    if (tag == "filter") return body.push_back(parse_filter_block());
    if (tag == "with") return body.push_back(parse_with());
    if (tag == "generation") return body.push_back(parse_generation());
    if (tag == "print") return parse_print(body);
    if (tag == "break" || tag == "continue") return body.push_back(parse_loop_control());
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "block") {
      fail(t, "'" + tag + "' is not supported: chat templates are rendered alone, without other templates or files");
    }
    if (tag == "autoescape") fail(t, "'autoescape' is not supported (transformers renders without autoescaping)");
    fail(t, "Encountered unknown tag '" + tag + "'.");
  }

  StmtPtr parse_if() {
    auto node = std::make_unique<IfStmt>(StmtKind::if_, cur().offset);
    advance();
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      node->branches.emplace_back(std::move(test), std::move(body));
      const std::string which = cur().text;
      advance();
      if (which == "elif") continue;
      if (which == "else") node->otherwise = parse_statements({"endif"}, true);
      return node;
    }
  }

  StmtPtr parse_for() {
    auto node = std::make_unique<ForStmt>(StmtKind::for_, cur().offset);
    advance();
    node->target = parse_assign_target({"in"}, false);
    expect_name("in");
    node->iter = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) node->filter = parse_expression(true);
    node->recursive = skip_name("recursive");
    ++loop_depth_;
    node->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    const bool has_else = cur().text == "else";
    advance();
    if (has_else) node->otherwise = parse_statements({"endfor"}, true);
    return node;
  }

  StmtPtr parse_set() {
    const uint32_t at = cur().offset;
    advance();
    Target target = parse_assign_target({}, true);
    if (skip_op("=")) {
      auto node = std::make_unique<SetStmt>(StmtKind::set, at);
      node->target = std::move(target);
      node->value = parse_tuple(false, true, {}, false);
      return node;
    }
    auto node = std::make_unique<SetBlockStmt>(StmtKind::set_block, at);
    node->target = std::move(target);
    if (is_op(cur(), "|")) node->filter = parse_filter(nullptr, false);
    node->body = parse_statements({"endset"}, true);
    return node;
  }

  // A macro's or call block's signature and body, with loops outside it not counting.
  std::shared_ptr<MacroDef> parse_macro_body(std::shared_ptr<MacroDef> def, Names end) {
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    def->body = parse_statements(end, true);
    loop_depth_ = saved_loops;
    std::vector<std::string> loads;
    find_loads(def->body, loads);
    for (const std::string& name : loads) {
      def->uses_caller = def->uses_caller || name == "caller";
      def->catch_kwargs = def->catch_kwargs || name == "kwargs";
      def->catch_varargs = def->catch_varargs || name == "varargs";
    }
    for (const auto& param : def->params) {
      if (param.first == "kwargs") def->catch_kwargs = false;
      if (param.first == "varargs") def->catch_varargs = false;
    }
    return def;
  }

  void parse_signature(MacroDef& def) {
    expect_op("(");
    bool defaults = false;
    while (!is_op(cur(), ")")) {
      if (!def.params.empty()) expect_op(",");
      const Token& name = expect_name();
      ExprPtr value;
      if (skip_op("=")) {
        value = parse_expression(true);
        defaults = true;
      } else if (defaults) {
        fail(name, "non-default argument follows default argument");
      }
      def.params.emplace_back(name.text, std::move(value));
    }
    expect_op(")");
  }

  StmtPtr parse_macro() {
    auto node = std::make_unique<MacroStmt>(StmtKind::macro, cur().offset);
    advance();
    auto def = std::make_shared<MacroDef>();
    def->offset = cur().offset;
    def->name = expect_name().text;
    parse_signature(*def);
    node->def = parse_macro_body(std::move(def), {"endmacro"});
    return node;
  }

  StmtPtr parse_call_block() {
    auto node = std::make_unique<CallBlockStmt>(StmtKind::call_block, cur().offset);
    advance();
    auto def = std::make_shared<MacroDef>();
    def->name = "caller";
    def->offset = node->offset;
    if (is_op(cur(), "(")) parse_signature(*def);
    const Token& at = cur();
    node->call = parse_expression(true);
    if (node->call->kind != ExprKind::call) fail(at, "expected call");
    node->caller = parse_macro_body(std::move(def), {"endcall"});
    return node;
  }

  StmtPtr parse_filter_block() {
    auto node = std::make_unique<FilterBlockStmt>(StmtKind::filter_block, cur().offset);
    advance();
    node->filter = parse_filter(nullptr, true);
    node->body = parse_statements({"endfilter"}, true);
    return node;
  }

  StmtPtr parse_with() {
    auto node = std::make_unique<WithStmt>(StmtKind::with, cur().offset);
    advance();
    while (cur().type != TokenType::block_end) {
      if (!node->bindings.empty()) expect_op(",");
      Target target = parse_assign_target({}, false);
      expect_op("=");
      node->bindings.emplace_back(std::move(target), parse_expression(true));
    }
    node->body = parse_statements({"endwith"}, true);
    return node;
  }

  StmtPtr parse_generation() {
    // The body is a macro in jinja2 (a CallBlock): loops outside it do not count.
    auto node = std::make_unique<BlockStmt>(StmtKind::generation, cur().offset);
    advance();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    node->body = parse_statements({"endgeneration"}, true);
    loop_depth_ = saved_loops;
    return node;
  }

  void parse_print(Body& body) {
    advance();
    bool first = true;
    while (cur().type != TokenType::block_end) {
      if (!first) expect_op(",");
      first = false;
      const uint32_t at = cur().offset;
      body.push_back(std::make_unique<PrintStmt>(at, parse_expression(true)));
    }
  }

  StmtPtr parse_loop_control() {
    const Token& t = cur();
    if (loop_depth_ == 0) fail(t, "'" + t.text + "' outside of a loop");
    advance();
    return std::make_unique<Stmt>(t.text == "break" ? StmtKind::break_ : StmtKind::continue_, t.offset);
  }

  // --- assignment targets --------------------------------------------------------------------
  Target parse_target_item(bool with_namespace) {
    const Token& t = cur();
    Target target;
    target.offset = t.offset;
    if (t.type == TokenType::name) {
      if (t.text == "true" || t.text == "false" || t.text == "none" || t.text == "True" || t.text == "False" ||
          t.text == "None") {
        fail(t, "can't assign to 'const'");
      }
      target.name = t.text;
      advance();
      if (with_namespace && skip_op(".")) {
        target.form = Target::Form::attribute;
        target.attr = expect_name().text;
      }
      return target;
    }
    if (skip_op("(")) {
      target.form = Target::Form::tuple;
      while (!is_op(cur(), ")")) {
        if (!target.items.empty()) expect_op(",");
        if (is_op(cur(), ")")) break;
        target.items.push_back(parse_target_item(with_namespace));
      }
      expect_op(")");
      return target;
    }
    fail(t, "can't assign to " + describe(t));
  }

  Target parse_assign_target(Names extra_end, bool with_namespace) {
    Target tuple;
    tuple.form = Target::Form::tuple;
    tuple.offset = cur().offset;
    bool is_tuple = false;
    while (true) {
      if (!tuple.items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      tuple.items.push_back(parse_target_item(with_namespace));
      if (!is_op(cur(), ",")) break;
      is_tuple = true;
    }
    if (!is_tuple) {
      if (tuple.items.empty()) fail(cur(), "expected an assignment target, got " + describe(cur()));
      return std::move(tuple.items[0]);
    }
    return tuple;
  }

  // --- expressions ---------------------------------------------------------------------------
  template <class T>
  std::unique_ptr<T> seal(std::unique_ptr<T> node) {
    uint32_t depth = 0;
    for_each_child(*node, [&](const Expr& child) { depth = std::max(depth, child.depth); });
    node->depth = depth + 1;
    node->has_slice = node->kind == ExprKind::slice;
    for_each_child(*node, [&](const Expr& child) { node->has_slice = node->has_slice || child.has_slice; });
    if (node->depth > kMaxExprDepth) {
      throw SyntaxFailure(node->offset, "expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels");
    }
    return node;
  }

  bool is_tuple_end(Names extra_end) const {
    const Token& t = cur();
    if (t.type == TokenType::variable_end || t.type == TokenType::block_end || is_op(t, ")")) return true;
    return extra_end.size() && in(t, extra_end);
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parentheses) {
    const uint32_t at = cur().offset;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (!is_op(cur(), ",")) break;
      is_tuple = true;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail(cur(), "Expected an expression, got " + describe(cur()));
    }
    auto node = std::make_unique<SeqExpr>(ExprKind::tuple, at);
    node->items = std::move(items);
    return seal(std::move(node));
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this, cur());
    ExprPtr expr = parse_or();
    while (is_name(cur(), "if")) {
      auto node = std::make_unique<CondExpr>(ExprKind::cond, cur().offset);
      advance();
      node->test = parse_or();
      if (skip_name("else")) node->otherwise = parse_condexpr();
      node->then = std::move(expr);
      expr = seal(std::move(node));
    }
    return expr;
  }

  ExprPtr logic(ExprKind kind, uint32_t at, ExprPtr left, ExprPtr right) {
    auto node = std::make_unique<LogicExpr>(kind, at);
    node->left = std::move(left);
    node->right = std::move(right);
    return seal(std::move(node));
  }

  // `a or b or c` / `a and b`: left-associative chains of one keyword.
  ExprPtr parse_keyword_chain(std::string_view keyword, ExprKind kind, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    while (is_name(cur(), keyword)) {
      const uint32_t at = cur().offset;
      advance();
      left = logic(kind, at, std::move(left), (this->*operand)());
    }
    return left;
  }

  ExprPtr parse_or() { return parse_keyword_chain("or", ExprKind::or_, &Parser::parse_and); }
  ExprPtr parse_and() { return parse_keyword_chain("and", ExprKind::and_, &Parser::parse_not); }

  ExprPtr parse_not() {
    if (is_name(cur(), "not")) {
      DepthGuard guard(*this, cur());
      const uint32_t at = cur().offset;
      advance();
      return logic(ExprKind::not_, at, parse_not(), nullptr);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const uint32_t at = cur().offset;
    ExprPtr expr = parse_math1();
    std::vector<std::pair<CompareOp, ExprPtr>> ops;
    while (true) {
      const Token& t = cur();
      std::optional<CompareOp> op;
      if (is_op(t, "==")) op = CompareOp::eq;
      if (is_op(t, "!=")) op = CompareOp::ne;
      if (is_op(t, "<")) op = CompareOp::lt;
      if (is_op(t, "<=")) op = CompareOp::le;
      if (is_op(t, ">")) op = CompareOp::gt;
      if (is_op(t, ">=")) op = CompareOp::ge;
      if (is_name(t, "in")) op = CompareOp::in;
      if (op) {
        advance();
      } else if (is_name(t, "not") && is_name(look(), "in")) {
        advance();
        advance();
        op = CompareOp::not_in;
      } else {
        break;
      }
      ops.emplace_back(*op, parse_math1());
    }
    if (ops.empty()) return expr;
    auto node = std::make_unique<CompareExpr>(ExprKind::compare, at);
    node->first = std::move(expr);
    node->rest = std::move(ops);
    return seal(std::move(node));
  }

  ExprPtr binary(BinaryOp op, uint32_t at, ExprPtr left, ExprPtr right) {
    auto node = std::make_unique<BinaryExpr>(at, op);
    node->left = std::move(left);
    node->right = std::move(right);
    return seal(std::move(node));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op(cur(), "+") || is_op(cur(), "-")) {
      const BinaryOp op = cur().text == "+" ? BinaryOp::add : BinaryOp::sub;
      const uint32_t at = cur().offset;
      advance();
      left = binary(op, at, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    const uint32_t at = cur().offset;
    ExprPtr first = parse_math2();
    if (!is_op(cur(), "~")) return first;
    auto node = std::make_unique<ConcatExpr>(ExprKind::concat, at);
    node->parts.push_back(std::move(first));
    while (skip_op("~")) node->parts.push_back(parse_math2());
    return seal(std::move(node));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (true) {
      const Token& t = cur();
      BinaryOp op;
      if (is_op(t, "*")) {
        op = BinaryOp::mul;
      } else if (is_op(t, "/")) {
        op = BinaryOp::div;
      } else if (is_op(t, "//")) {
        op = BinaryOp::floordiv;
      } else if (is_op(t, "%")) {
        op = BinaryOp::mod;
      } else {
        return left;
      }
      const uint32_t at = t.offset;
      advance();
      left = binary(op, at, std::move(left), parse_pow());
    }
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op(cur(), "**")) {
      const uint32_t at = cur().offset;
      advance();
      left = binary(BinaryOp::pow, at, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this, cur());
    const Token& t = cur();
    ExprPtr node;
    if (is_op(t, "-") || is_op(t, "+")) {
      advance();
      node = logic(t.text == "-" ? ExprKind::negate : ExprKind::plus, t.offset, parse_unary(false), nullptr);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::name: {
        advance();
        if (t.text == "true" || t.text == "True") return std::make_unique<LiteralExpr>(t.offset, Value::boolean(true));
        if (t.text == "false" || t.text == "False") return std::make_unique<LiteralExpr>(t.offset, Value::boolean(false));
        if (t.text == "none" || t.text == "None") return std::make_unique<LiteralExpr>(t.offset, Value::none());
        return std::make_unique<NameExpr>(t.offset, t.text);
      }
      case TokenType::string: {
        std::string text;
        while (cur().type == TokenType::string) {
          text += cur().text;
          advance();
        }
        return std::make_unique<LiteralExpr>(t.offset, Value::string(std::move(text)));
      }
      case TokenType::integer: advance(); return std::make_unique<LiteralExpr>(t.offset, Value::integer(t.int_value));
      case TokenType::floating: advance(); return std::make_unique<LiteralExpr>(t.offset, Value::floating(t.float_value));
      default: break;
    }
    if (skip_op("(")) {
      ExprPtr node = parse_tuple(false, true, {}, true);
      expect_op(")");
      return node;
    }
    if (is_op(t, "[")) return parse_list();
    if (is_op(t, "{")) return parse_dict();
    fail(t, "unexpected " + describe(t));
  }

  ExprPtr parse_list() {
    auto node = std::make_unique<SeqExpr>(ExprKind::list, cur().offset);
    expect_op("[");
    while (!is_op(cur(), "]")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op(cur(), "]")) break;
      node->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return seal(std::move(node));
  }

  ExprPtr parse_dict() {
    auto node = std::make_unique<DictExpr>(ExprKind::dict, cur().offset);
    expect_op("{");
    while (!is_op(cur(), "}")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op(cur(), "}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      node->items.emplace_back(std::move(key), parse_expression(true));
    }
    expect_op("}");
    return seal(std::move(node));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(cur(), ".") || is_op(cur(), "[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op(cur(), "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op(cur(), "|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name(cur(), "is")) {
        node = parse_test(std::move(node));
      } else if (is_op(cur(), "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = cur();
    advance();
    if (t.text == ".") {
      const Token& attr = cur();
      advance();
      if (attr.type == TokenType::name) return seal(std::make_unique<AttrExpr>(t.offset, std::move(node), attr.text));
      if (attr.type != TokenType::integer) fail(attr, "expected name or number");
      auto item = std::make_unique<ItemExpr>(ExprKind::item, t.offset);
      item->object = std::move(node);
      item->key = std::make_unique<LiteralExpr>(attr.offset, Value::integer(attr.int_value));
      return seal(std::move(item));
    }
    std::vector<ExprPtr> args;
    while (!is_op(cur(), "]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto bare_slice = [](const ExprPtr& arg) {  // `a:b` itself, not an expression that slices
      return arg->kind == ExprKind::slice && !static_cast<const SliceExpr&>(*arg).object;
    };
    if (args.size() == 1 && bare_slice(args[0])) {
      auto& slice = static_cast<SliceExpr&>(*args[0]);
      slice.object = std::move(node);
      return seal(std::move(args[0]));
    }
    auto item = std::make_unique<ItemExpr>(ExprKind::item, t.offset);
    item->object = std::move(node);
    if (args.size() == 1) {
      item->key = std::move(args[0]);
    } else {
      auto tuple = std::make_unique<SeqExpr>(ExprKind::tuple, t.offset);
      for (auto& arg : args) {
        if (bare_slice(arg)) fail(t, "slices inside a tuple subscript are not supported");
        tuple->items.push_back(std::move(arg));
      }
      item->key = seal(std::move(tuple));
    }
    return seal(std::move(item));
  }

  // One subscript: an expression or a slice `start:stop:step` (its object is filled in later).
  ExprPtr parse_subscribed() {
    const uint32_t at = cur().offset;
    ExprPtr start;
    if (!is_op(cur(), ":")) {
      start = parse_expression(true);
      if (!is_op(cur(), ":")) return start;
    }
    advance();
    auto slice = std::make_unique<SliceExpr>(ExprKind::slice, at);
    slice->start = std::move(start);
    if (!is_op(cur(), "]") && !is_op(cur(), ",") && !is_op(cur(), ":")) slice->stop = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op(cur(), "]") && !is_op(cur(), ",")) slice->step = parse_expression(true);
    }
    return slice;
  }

  ArgExprs parse_call_args() {
    const Token& open = expect_op("(");
    ArgExprs args;
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail(open, "invalid syntax for function call expression");
    };
    while (!is_op(cur(), ")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(cur(), ")")) break;
      }
      if (skip_op("*")) {
        ensure(!args.star && !args.star_star);
        args.star = parse_expression(true);
      } else if (skip_op("**")) {
        ensure(!args.star_star);
        args.star_star = parse_expression(true);
      } else if (cur().type == TokenType::name && is_op(look(), "=")) {
        ensure(!args.star_star);
        std::string key = cur().text;
        advance();
        advance();
        args.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!args.star && !args.star_star && args.keyword.empty());
        args.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto node = std::make_unique<CallExpr>(ExprKind::call, callee->offset);
    node->callee = std::move(callee);
    node->args = parse_call_args();
    return seal(std::move(node));
  }

  std::string dotted_name() {
    std::string name = expect_name().text;
    while (skip_op(".")) name += "." + expect_name().text;
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op(cur(), "|") || start_inline) {
      if (!start_inline) advance();
      start_inline = false;
      auto filter = std::make_unique<FilterExpr>(ExprKind::filter, cur().offset);
      filter->name = dotted_name();
      filter->filter = find_filter(filter->name);
      if (is_op(cur(), "(")) filter->args = parse_call_args();
      filter->operand = std::move(node);
      node = seal(std::move(filter));
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const uint32_t is_at = cur().offset;
    advance();
    const bool negated = skip_name("not");
    auto test = std::make_unique<FilterExpr>(ExprKind::test, cur().offset);
    test->name = dotted_name();
    test->test = find_test(test->name);
    const Token& t = cur();
    if (is_op(t, "(")) {
      test->args = parse_call_args();
    } else if ((t.type == TokenType::name || t.type == TokenType::string || t.type == TokenType::integer ||
                t.type == TokenType::floating || is_op(t, "(") || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
      if (is_name(t, "is")) fail(t, "You cannot chain multiple tests with is");
      test->args.positional.push_back(parse_postfix(parse_primary()));
    }
    test->operand = std::move(node);
    ExprPtr result = seal(std::move(test));
    return negated ? logic(ExprKind::not_, is_at, std::move(result), nullptr) : std::move(result);
  }

  // --- unknown filters and tests ---------------------------------------------------------------
  // jinja2 fails at compile time for an unknown filter or test, except in an `if` statement's
  // frame or a conditional expression ("soft" frames), where the call fails when evaluated.
  void check_unknown(const Expr& e, bool soft) const {
    if (e.kind == ExprKind::cond) soft = true;
    if ((e.kind == ExprKind::filter || e.kind == ExprKind::test) && !soft) {
      const auto& f = static_cast<const FilterExpr&>(e);
      if (!f.filter && !f.test) {
        throw SyntaxFailure(f.offset, std::string(e.kind == ExprKind::filter ? "unknown filter '" : "unknown test '") +
                                          f.name + "'");
      }
    }
    for_each_child(e, [&](const Expr& child) { check_unknown(child, soft); });
  }

  void check_unknown(const Body& body, bool soft) const {
    for (const auto& s : body) {
      const StmtParts p = parts_of(*s);
      const bool if_frame = soft || s->kind == StmtKind::if_;
      for (const Expr* e : p.outer_exprs) check_unknown(*e, if_frame);
      for (const Expr* e : p.inner_exprs) check_unknown(*e, false);
      for (const Body* b : p.same_frame) check_unknown(*b, if_frame);
      for (const Body* b : p.inner_frame) check_unknown(*b, false);
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  uint32_t depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace ferry::jinja
