// The values a template computes with, as Python sees them: None, bool, int, float, str (with
// markupsafe's Markup flag: the `safe` filter's result, which escapes what is added to it), list
// and tuple (and the dict views .items()/.keys()/.values() return), dict (insertion-ordered), and
// objects (namespace(), loop, macros, functions, generators such as map()'s result). Lists and
// dicts never change once built (the sandbox is immutable), so values share them freely;
// namespaces are the only mutable values. Copying a Value is cheap (a reference count).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::jinja {

class Evaluator;
class Object;
struct ListData;
struct DictData;
struct UndefinedData;

enum class Kind : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, object };

// How a ListData prints and what it allows (a tuple is a list that prints as a tuple; range()
// prints as "range(0, 3)"; a dict view cannot be indexed; only lists and tuples serialise).
enum class ListFlavor : uint8_t { list, tuple, range, dict_items, dict_keys, dict_values };

// Nested lists and dicts deeper than this are refused when built: printing, comparing and
// destroying them recurses.
constexpr uint32_t kMaxValueDepth = 512;

class Value {
 public:
  Value() = default;  // Undefined (no hint)
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s, bool markup = false);
  // A string value that refers to `s` without owning it (no allocation, no reference count): only
  // for text that outlives every value made during a render, such as the render variables' JSON
  // or the template's own literals.
  static Value borrowed_string(const std::string& s, bool markup = false);
  static Value make_list(std::vector<Value> items, ListFlavor flavor = ListFlavor::list);
  // range(start, stop, step): its items listed (the sandbox keeps ranges short).
  static Value make_range(int64_t start, int64_t stop, int64_t step);
  static Value make_dict(std::shared_ptr<const DictData> data);
  static Value make_object(std::shared_ptr<Object> object);
  static Value make_undefined(std::shared_ptr<const UndefinedData> data);
  // Undefined hints jinja2 gives (see undefined_message).
  static Value undefined_name(std::string_view name);
  static Value undefined_attribute(const Value& owner, std::string_view name);
  static Value undefined_hint(std::string hint, bool security = false);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_object() const { return kind_ == Kind::object; }
  // Python ints: int and bool (bool is an int subclass).
  bool is_integral() const { return kind_ == Kind::integer || kind_ == Kind::boolean; }
  bool is_number() const { return is_integral() || kind_ == Kind::floating; }
  bool is_markup() const { return markup_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::boolean ? (b_ ? 1 : 0) : i_; }  // is_integral()
  double as_float() const { return kind_ == Kind::floating ? f_ : static_cast<double>(as_int()); }  // is_number()
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const ListData& list() const { return *static_cast<const ListData*>(ptr_.get()); }
  const DictData& dict() const { return *static_cast<const DictData*>(ptr_.get()); }
  std::shared_ptr<const DictData> dict_ptr() const { return std::static_pointer_cast<const DictData>(ptr_); }
  Object& object() const { return *static_cast<Object*>(ptr_.get()); }
  std::shared_ptr<Object> object_ptr() const { return std::static_pointer_cast<Object>(ptr_); }
  const UndefinedData* undefined_data() const { return static_cast<const UndefinedData*>(ptr_.get()); }
  // Identity for `is sameas` and cycle checks.
  const void* identity() const { return ptr_.get(); }

  // The same string with the Markup flag set or cleared.
  Value with_markup(bool markup) const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}

  Kind kind_ = Kind::undefined;
  bool markup_ = false;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> ptr_;  // std::string, ListData, DictData, Object or UndefinedData
};

struct ListData {
  std::vector<Value> items;
  ListFlavor flavor = ListFlavor::list;
  uint32_t depth = 1;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // ListFlavor::range
};

// An insertion-ordered dict with Python's key equality (1 == 1.0 == True) and hashing.
struct DictData {
  uint32_t depth = 1;

  const std::vector<std::pair<Value, Value>>& items() const { return entries_; }

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Adds or (keeping the first position, as Python does) replaces. Throws for unhashable keys.
  void set(Value key, Value value);
  // Adds a key the dict does not hold yet (a JSON object's keys are distinct).
  void append_new(Value key, Value value);
  void reserve(size_t n) { entries_.reserve(n); }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<Value, Value>> entries_;
  void rebuild_index();
  void add_to_index(size_t i);
  template <class Matches>
  size_t position(size_t hash, Matches&& matches) const;
  size_t position_of(const Value& key) const;
  std::vector<size_t> hashes_;  // of each key, once the dict is indexed
  std::vector<int32_t> index_;  // open addressing over entries, built once the dict is large
};

struct UndefinedData {
  enum class Form : uint8_t { name, attribute, hint };
  Form form = Form::hint;
  bool security = false;     // the sandbox refused an attribute: using it is a SecurityError
  std::string name;          // the missing name, attribute or item (repr'd in messages)
  std::string owner;         // "dict object", "list object", ... for attributes
  bool name_is_string = true;
};

// What using an undefined value says (jinja2's Undefined._undefined_message).
std::string undefined_message(const Value& undefined);
// Throws the error using `undefined` as a value raises (UndefinedError or SecurityError).
[[noreturn]] void fail_undefined(const Value& undefined);

// Arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Anything that is not plain data. Subclasses: namespace, loop, macros, functions, methods,
// generators (evaluator.h, globals.h, methods.h, iterators.h).
class Object : public std::enable_shared_from_this<Object> {
 public:
  virtual ~Object() = default;
  // Python's type name, for messages ("'Namespace' object is not iterable").
  virtual std::string_view type_name() const = 0;
  // getattr(obj, name); undefined when there is none.
  virtual Value attribute(std::string_view name) const;
  virtual bool callable() const { return false; }
  virtual Value call(Evaluator& ev, CallArgs& args);
  // One-shot iterators (generators, reversed()): next item, or nullopt at the end.
  virtual bool is_iterator() const { return false; }
  virtual std::optional<Value> next(Evaluator& ev);
  virtual std::string repr() const;
  // Forget every value held, breaking reference cycles at the end of a render.
  virtual void clear() {}
};

// Python's bool(value).
bool truthy(const Value& v);
// Python's type(value).__name__: "NoneType", "int", "str", "list", "dict", "Undefined", ...
std::string type_name(const Value& v);
// Python's ==, with its cross-type rules (1 == 1.0 == True; Markup == str; list != tuple).
bool equals(const Value& a, const Value& b);
// Python's hash() consistent with equals; throws Failure("unhashable type: 'list'").
size_t hash_value(const Value& v);
// jinja2's has_safe_repr: plain data (None, bool, numbers, str, range, and lists, tuples and dicts
// of them), which its compiler can write into code as a constant.
bool has_safe_repr(const Value& v);
// The depth a new list or dict holding `items` would have; throws past kMaxValueDepth.
uint32_t depth_above(const Value& item, uint32_t depth);

Value make_tuple(std::vector<Value> items);
// str, list, tuple and range: len() and indexing by int.
bool indexable(const Value& v);
Value make_string_list(std::vector<std::string> parts, bool markup = false);

}  // namespace ferry::jinja
