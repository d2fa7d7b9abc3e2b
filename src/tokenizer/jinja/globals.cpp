// The template's built-in globals (see globals.h).
#include "src/tokenizer/jinja/globals.h"

#include <ctime>
#include <unordered_map>

#include "src/tokenizer/jinja/call_args.h"
#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/methods.h"
#include "src/tokenizer/jinja/operators.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {
namespace {

// jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value g_range(Evaluator& ev, const Value&, const CallArgs& args) {
  if (!args.keyword.empty()) throw Failure("TypeError: range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw Failure("TypeError: range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  const int64_t start = p.size() == 1 ? 0 : to_index(p[0], "range() argument");
  const int64_t stop = to_index(p.size() == 1 ? p[0] : p[1], "range() argument");
  const int64_t step = p.size() == 3 ? to_index(p[2], "range() argument") : 1;
  if (step == 0) throw Failure("ValueError: range() arg 3 must not be zero");
  const long double span = step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
  const long double count = span <= 0 ? 0 : (span - 1) / (step > 0 ? step : -static_cast<long double>(step)) + 1;
  if (count > kMaxRange) {
    throw Failure("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  ev.charge(static_cast<uint64_t>(count));
  return Value::make_range(start, stop, step);
}

// dict(*args, **kwargs) as Python builds it: a mapping or (key, value) pairs, then keywords.
std::shared_ptr<DictData> build_dict(Evaluator& ev, const CallArgs& args, const char* name) {
  if (args.positional.size() > 1) throw Failure(std::string("TypeError: ") + name + " expected at most 1 argument");
  auto dict = std::make_shared<DictData>();
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [key, value] : source.dict().items()) dict->set(key, value);
    } else {
      size_t index = 0;
      for (const Value& pair : iterate(ev, source)) {
        const std::vector<Value> kv = iterate(ev, pair);
        if (kv.size() != 2) {
          throw Failure("ValueError: dictionary update sequence element #" + std::to_string(index) + " has length " +
                        std::to_string(kv.size()) + "; 2 is required");
        }
        dict->set(kv[0], kv[1]);
        ++index;
      }
    }
  }
  for (const auto& [key, value] : args.keyword) dict->set(Value::string(key), value);
  return dict;
}

Value g_fromkeys(Evaluator& ev, const Value&, const CallArgs& args) {
  ArgReader a(args, "fromkeys", {"iterable", "value"}, true);
  auto dict = std::make_shared<DictData>();
  for (Value& key : iterate(ev, a.get(0))) dict->set(std::move(key), a.get_or(1, Value::none()));
  return Value::make_dict(std::move(dict));
}

// transformers' TemplateDict: dict(...) and dict.fromkeys(...), nothing else.
class DictGlobal : public Object {
 public:
  std::string_view type_name() const override { return "TemplateDict"; }
  bool callable() const override { return true; }
  Value call(Evaluator& ev, CallArgs& args) override { return Value::make_dict(build_dict(ev, args, "dict")); }
  Value attribute(std::string_view name) const override {
    if (name != "fromkeys") return Value();
    return Value::make_object(std::make_shared<BuiltinFunction>("fromkeys", g_fromkeys));
  }
};

Value g_namespace(Evaluator& ev, const Value&, const CallArgs& args) {
  const auto attrs = build_dict(ev, args, "namespace");
  auto ns = std::make_shared<NamespaceObject>();
  for (const auto& [key, value] : attrs->items()) {
    if (!key.is_string()) throw Failure("TypeError: keywords must be strings");
    ns->set(key.str(), value);
  }
  ev.track(ns);
  return Value::make_object(std::move(ns));
}

class CyclerObject : public Object {
 public:
  explicit CyclerObject(std::vector<Value> items) : items_(std::move(items)) {}
  std::string_view type_name() const override { return "Cycler"; }
  Value attribute(std::string_view name) const override {
    if (name == "current") return items_[pos_];
    if (name == "next" || name == "reset") {
      auto self = std::const_pointer_cast<Object>(shared_from_this());
      return Value::make_object(std::make_shared<BuiltinFunction>(name == "next" ? "next" : "reset",
                                                                  name == "next" ? next_item : reset, Value::make_object(self)));
    }
    return Value();
  }
  void clear() override { items_.assign(1, Value()); pos_ = 0; }

 private:
  static Value next_item(Evaluator&, const Value& self, const CallArgs& args) {
    expect_no_args(args, "next");
    auto& c = static_cast<CyclerObject&>(self.object());
    Value item = c.items_[c.pos_];
    c.pos_ = (c.pos_ + 1) % c.items_.size();
    return item;
  }
  static Value reset(Evaluator&, const Value& self, const CallArgs& args) {
    expect_no_args(args, "reset");
    static_cast<CyclerObject&>(self.object()).pos_ = 0;
    return Value::none();
  }
  std::vector<Value> items_;
  size_t pos_ = 0;
};

Value g_cycler(Evaluator& ev, const Value&, const CallArgs& args) {
  if (args.positional.empty()) throw Failure("RuntimeError: at least one item has to be provided");
  auto cycler = std::make_shared<CyclerObject>(args.positional);
  ev.track(cycler);
  return Value::make_object(std::move(cycler));
}

class JoinerObject : public Object {
 public:
  explicit JoinerObject(Value sep) : sep_(std::move(sep)) {}
  std::string_view type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Evaluator&, CallArgs& args) override {
    expect_no_args(args, "joiner");
    if (!used_) {
      used_ = true;
      return Value::string("");
    }
    return sep_;
  }

 private:
  Value sep_;
  bool used_ = false;
};

Value g_joiner(Evaluator&, const Value&, const CallArgs& args) {
  ArgReader a(args, "joiner", {"sep"});
  return Value::make_object(std::make_shared<JoinerObject>(a.get_or(0, Value::string(", "))));
}

Value g_raise_exception(Evaluator&, const Value&, const CallArgs& args) {
  ArgReader a(args, "raise_exception", {"message"});
  throw Failure(to_str(a.get(0)), ErrorKind::raised);
}

// datetime.now().strftime(format): %f is the microseconds (0 here), %z and %Z are empty for a
// naive datetime; the rest is the C library's strftime, as in CPython.
Value g_strftime_now(Evaluator& ev, const Value&, const CallArgs& args) {
  ArgReader a(args, "strftime_now", {"format"});
  const Value& format = a.get(0);
  if (!format.is_string()) throw Failure("TypeError: strftime() argument 1 must be str, not " + type_name(format));
  std::string fmt;
  const std::string& f = format.str();
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 == f.size()) {
      fmt += f[i];
    } else if (f[i + 1] == 'f') {
      fmt += "000000", ++i;
    } else if (f[i + 1] == 'z' || f[i + 1] == 'Z') {
      ++i;
    } else {
      fmt += f.substr(i, 2), ++i;
    }
  }
  if (fmt.empty()) return Value::string("");
  std::tm tm = ev.now();
  ev.check_size(fmt.size() * 64);
  std::string out(fmt.size() * 64 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
  out.resize(n);
  return Value::string(std::move(out));
}

Value function(std::string_view name, BuiltinFunction::Fn fn) {
  return Value::make_object(std::make_shared<BuiltinFunction>(name, fn));
}

}  // namespace

Value NamespaceObject::attribute(std::string_view name) const {
  for (const auto& [key, value] : attrs_) {
    if (key == name) return value;
  }
  return Value();
}

std::string NamespaceObject::repr() const {
  std::string out = "<Namespace {";
  for (size_t i = 0; i < attrs_.size(); ++i) {
    out += (i ? ", " : "") + repr_string(attrs_[i].first) + ": " + ferry::jinja::repr(attrs_[i].second);
  }
  return out + "}>";
}

void NamespaceObject::set(std::string_view name, Value value) {
  if (!name.empty() && name[0] == '_') {
    throw Failure("SecurityError: Chat templates cannot store underscore-prefixed attributes on a namespace, but got " +
                  repr_string(name) + ". Please rename the attribute.");
  }
  for (auto& [key, v] : attrs_) {
    if (key == name) {
      v = std::move(value);
      return;
    }
  }
  attrs_.emplace_back(std::string(name), std::move(value));
}

const Value* builtin_global(std::string_view name) {
  static const std::unordered_map<std::string_view, Value> globals = {
      {"range", function("range", g_range)},
      {"dict", Value::make_object(std::make_shared<DictGlobal>())},
      {"namespace", function("namespace", g_namespace)},
      {"cycler", function("cycler", g_cycler)},
      {"joiner", function("joiner", g_joiner)},
      {"raise_exception", function("raise_exception", g_raise_exception)},
      {"strftime_now", function("strftime_now", g_strftime_now)},
  };
  const auto it = globals.find(name);
  return it == globals.end() ? nullptr : &it->second;
}

}  // namespace ferry::jinja
