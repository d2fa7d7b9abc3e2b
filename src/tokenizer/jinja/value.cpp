// Values: construction, Python truthiness, equality and hashing, dicts, undefined messages.
#include "src/tokenizer/jinja/value.h"

#include <cmath>
#include <functional>

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {
namespace {

constexpr size_t kIndexThreshold = 8;  // dicts up to this size are searched linearly

uint32_t item_depth(const Value& v) {
  if (v.is_list()) return v.list().depth;
  if (v.is_dict()) return v.dict().depth;
  return 0;
}

// Python compares an int and a float exactly, not through a rounded double.
bool int_equals_float(int64_t i, double f) {
  if (!std::isfinite(f) || f != std::trunc(f) || f < -9.3e18 || f > 9.3e18) return false;
  return static_cast<int64_t>(f) == i && static_cast<double>(i) == f;
}

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
  if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
  return a.is_float() ? int_equals_float(b.as_int(), a.as_float()) : int_equals_float(a.as_int(), b.as_float());
}

bool lists_equal(const ListData& a, const ListData& b) {
  if (a.flavor != b.flavor || a.items.size() != b.items.size()) return false;
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (!equals(a.items[i], b.items[i])) return false;
  }
  return true;
}

bool dicts_equal(const DictData& a, const DictData& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a.items()) {
    const Value* other = b.find(key);
    if (!other || !equals(value, *other)) return false;
  }
  return true;
}

size_t combine(size_t seed, size_t h) { return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }

std::string object_type_repr(const Value& owner) {
  if (owner.is_none()) return "None";
  return type_name(owner) + " object";
}

}  // namespace

Value Value::none() { return Value(Kind::none); }

Value Value::boolean(bool b) {
  Value v(Kind::boolean);
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v(Kind::integer);
  v.i_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v(Kind::floating);
  v.f_ = d;
  return v;
}

Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::string;
  v.markup_ = markup;
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::borrowed_string(const std::string& s, bool markup) {
  Value v(Kind::string);
  v.markup_ = markup;
  v.ptr_ = std::shared_ptr<void>(std::shared_ptr<void>(), const_cast<std::string*>(&s));  // aliasing, unowned
  return v;
}

Value Value::make_list(std::vector<Value> items, ListFlavor flavor) {
  auto data = std::make_shared<ListData>();
  for (const Value& item : items) data->depth = depth_above(item, data->depth);
  data->items = std::move(items);
  data->flavor = flavor;
  Value v;
  v.kind_ = Kind::list;
  v.ptr_ = std::move(data);
  return v;
}

Value Value::make_range(int64_t start, int64_t stop, int64_t step) {
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
  Value v = make_list(std::move(items), ListFlavor::range);
  auto& data = *static_cast<ListData*>(v.ptr_.get());
  data.range_start = start;
  data.range_stop = stop;
  data.range_step = step;
  return v;
}

Value Value::make_dict(std::shared_ptr<const DictData> data) {
  Value v;
  v.kind_ = Kind::dict;
  v.ptr_ = std::const_pointer_cast<DictData>(std::move(data));
  return v;
}

Value Value::make_object(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::object;
  v.ptr_ = std::move(object);
  return v;
}

Value Value::make_undefined(std::shared_ptr<const UndefinedData> data) {
  Value v;
  v.ptr_ = std::const_pointer_cast<UndefinedData>(std::move(data));
  return v;
}

Value Value::undefined_name(std::string_view name) {
  auto data = std::make_shared<UndefinedData>();
  data->form = UndefinedData::Form::name;
  data->name = name;
  return make_undefined(std::move(data));
}

Value Value::undefined_attribute(const Value& owner, std::string_view name) {
  auto data = std::make_shared<UndefinedData>();
  data->form = UndefinedData::Form::attribute;
  data->name = name;
  data->owner = object_type_repr(owner);
  return make_undefined(std::move(data));
}

Value Value::undefined_hint(std::string hint, bool security) {
  auto data = std::make_shared<UndefinedData>();
  data->form = UndefinedData::Form::hint;
  data->name = std::move(hint);
  data->security = security;
  return make_undefined(std::move(data));
}

Value Value::with_markup(bool markup) const {
  Value v = *this;
  v.markup_ = markup && kind_ == Kind::string;
  return v;
}

// Small dicts (a message, a tool call) are searched linearly; hashes are computed, and an
// open-addressing index built, only once a dict grows past kIndexThreshold entries.
void DictData::rebuild_index() {
  for (size_t i = hashes_.size(); i < entries_.size(); ++i) hashes_.push_back(hash_value(entries_[i].first));
  size_t buckets = 16;
  while (buckets < entries_.size() * 2) buckets *= 2;
  index_.assign(buckets, -1);
  for (size_t i = 0; i < entries_.size(); ++i) add_to_index(i);
}

void DictData::add_to_index(size_t i) {
  const size_t mask = index_.size() - 1;
  size_t slot = hashes_[i] & mask;
  while (index_[slot] >= 0) slot = (slot + 1) & mask;
  index_[slot] = static_cast<int32_t>(i);
}

template <class Matches>
size_t DictData::position(size_t hash, Matches&& matches) const {
  const size_t mask = index_.size() - 1;
  for (size_t slot = hash & mask; index_[slot] >= 0; slot = (slot + 1) & mask) {
    const auto i = static_cast<size_t>(index_[slot]);
    if (hashes_[i] == hash && matches(entries_[i].first)) return i;
  }
  return entries_.size();
}

size_t DictData::position_of(const Value& key) const {
  if (index_.empty()) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (equals(entries_[i].first, key)) return i;
    }
    return entries_.size();
  }
  size_t hash = 0;
  try {
    hash = hash_value(key);
  } catch (const Failure&) {
    return entries_.size();  // an unhashable key is in no dict; callers that must raise check first
  }
  return position(hash, [&](const Value& k) { return equals(k, key); });
}

const Value* DictData::find(const Value& key) const {
  const size_t i = position_of(key);
  return i < entries_.size() ? &entries_[i].second : nullptr;
}

const Value* DictData::find(std::string_view key) const {
  auto matches = [&](const Value& k) { return k.is_string() && k.str() == key; };
  if (index_.empty()) {
    for (const auto& entry : entries_) {
      if (matches(entry.first)) return &entry.second;
    }
    return nullptr;
  }
  const size_t i = position(std::hash<std::string_view>{}(key), matches);
  return i < entries_.size() ? &entries_[i].second : nullptr;
}

void DictData::set(Value key, Value value) {
  if (!key.is_string()) hash_value(key);  // throws for an unhashable key, as Python does
  const size_t i = position_of(key);
  if (i < entries_.size()) {
    depth = depth_above(value, depth);
    entries_[i].second = std::move(value);
    return;
  }
  append_new(std::move(key), std::move(value));
}

void DictData::append_new(Value key, Value value) {
  depth = depth_above(value, depth_above(key, depth));
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() <= kIndexThreshold) return;
  if (entries_.size() * 2 > index_.size()) {
    rebuild_index();
  } else {
    hashes_.push_back(hash_value(entries_.back().first));
    add_to_index(entries_.size() - 1);
  }
}

std::string undefined_message(const Value& undefined) {
  const UndefinedData* data = undefined.undefined_data();
  if (!data) return "value is undefined";
  switch (data->form) {
    case UndefinedData::Form::name: return repr_string(data->name) + " is undefined";
    case UndefinedData::Form::attribute:
      return repr_string(data->owner) + " has no attribute " + repr_string(data->name);
    case UndefinedData::Form::hint: break;
  }
  return data->name;
}

void fail_undefined(const Value& undefined) {
  const UndefinedData* data = undefined.undefined_data();
  const bool security = data && data->security;
  throw Failure((security ? "SecurityError: " : "UndefinedError: ") + undefined_message(undefined));
}

Value Object::attribute(std::string_view) const { return Value(); }

Value Object::call(Evaluator&, CallArgs&) {
  throw Failure("TypeError: '" + std::string(type_name()) + "' object is not callable");
}

std::optional<Value> Object::next(Evaluator&) { return std::nullopt; }

std::string Object::repr() const { return "<" + std::string(type_name()) + " object at " + address_text(this) + ">"; }

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return v.as_bool();
    case Kind::integer: return v.as_int() != 0;
    case Kind::floating: return v.as_float() != 0.0;
    case Kind::string: return !v.str().empty();
    case Kind::list: return !v.list().items.empty();
    case Kind::dict: return v.dict().size() != 0;
    case Kind::object: return true;  // a generator is true even when it would yield nothing
  }
  return false;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return v.is_markup() ? "Markup" : "str";
    case Kind::list:
      switch (v.list().flavor) {
        case ListFlavor::list: return "list";
        case ListFlavor::tuple: return "tuple";
        case ListFlavor::range: return "range";
        case ListFlavor::dict_items: return "dict_items";
        case ListFlavor::dict_keys: return "dict_keys";
        case ListFlavor::dict_values: return "dict_values";
      }
      break;
    case Kind::dict: return "dict";
    case Kind::object: return std::string(v.object().type_name());
  }
  return "object";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string: return a.identity() == b.identity() || a.str() == b.str();
    case Kind::list: return a.identity() == b.identity() || lists_equal(a.list(), b.list());
    case Kind::dict: return a.identity() == b.identity() || dicts_equal(a.dict(), b.dict());
    case Kind::object: return a.identity() == b.identity();
    default: return false;
  }
}

size_t hash_value(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return 0x5bd1e995;
    case Kind::none: return 0x27d4eb2d;
    case Kind::boolean:
    case Kind::integer: return std::hash<int64_t>{}(v.as_int());
    case Kind::floating: {
      const double f = v.as_float();
      if (f == std::trunc(f) && std::fabs(f) < 9.2e18) return std::hash<int64_t>{}(static_cast<int64_t>(f));
      return std::hash<double>{}(f);
    }
    case Kind::string: return std::hash<std::string_view>{}(v.str());
    case Kind::list:
      if (v.list().flavor == ListFlavor::tuple || v.list().flavor == ListFlavor::range) {
        size_t h = 0x345678;
        for (const Value& item : v.list().items) h = combine(h, hash_value(item));
        return h;
      }
      break;
    case Kind::dict: break;
    case Kind::object: return std::hash<const void*>{}(v.identity());
  }
  throw Failure("TypeError: unhashable type: '" + type_name(v) + "'");
}

bool has_safe_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined:
    case Kind::object: return false;
    case Kind::list: {
      const ListData& l = v.list();
      if (l.flavor != ListFlavor::list && l.flavor != ListFlavor::tuple && l.flavor != ListFlavor::range) return false;
      for (const Value& item : l.items) {
        if (!has_safe_repr(item)) return false;
      }
      return true;
    }
    case Kind::dict:
      for (const auto& [key, value] : v.dict().items()) {
        if (!has_safe_repr(key) || !has_safe_repr(value)) return false;
      }
      return true;
    default: return true;
  }
}

uint32_t depth_above(const Value& item, uint32_t depth) {
  const uint32_t d = item_depth(item) + 1;
  if (d > kMaxValueDepth) {
    throw Failure("values nested deeper than " + std::to_string(kMaxValueDepth) + " levels", ErrorKind::limit);
  }
  return d > depth ? d : depth;
}

Value make_tuple(std::vector<Value> items) { return Value::make_list(std::move(items), ListFlavor::tuple); }

bool indexable(const Value& v) {
  if (v.is_string()) return true;
  if (!v.is_list()) return false;
  const ListFlavor f = v.list().flavor;
  return f == ListFlavor::list || f == ListFlavor::tuple || f == ListFlavor::range;
}

Value make_string_list(std::vector<std::string> parts, bool markup) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& part : parts) items.push_back(Value::string(std::move(part), markup));
  return Value::make_list(std::move(items));
}

}  // namespace ferry::jinja
