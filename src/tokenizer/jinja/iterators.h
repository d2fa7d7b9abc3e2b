// One-shot iterators: what jinja2's map, select, reject, selectattr, rejectattr, unique, items,
// batch and slice filters return (Python generators) and what reverse returns for a list
// (reversed()). Like Python's, they have no len(), print as "<generator object>", are true even
// when they would yield nothing, cannot be indexed or serialised, run lazily (`|first` pulls one
// item) and are used up by the first loop over them.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

class Generator : public Object {
 public:
  using Next = std::function<std::optional<Value>(Evaluator&)>;
  // `type` is Python's type name ("generator", "list_reverseiterator"); `function` the jinja2
  // function a generator comes from, for its repr ("<generator object sync_do_map at 0x...>").
  Generator(std::string_view type, std::string_view function, Next next)
      : type_(type), function_(function), next_(std::move(next)) {}
  std::string_view type_name() const override { return type_; }
  bool is_iterator() const override { return true; }
  std::optional<Value> next(Evaluator& ev) override;
  std::string repr() const override;
  void clear() override;

 private:
  std::string_view type_, function_;
  Next next_;
  bool running_ = false;
};

// A generator value (tracked by the evaluator, which clears it when the render ends).
Value make_generator(Evaluator& ev, std::string_view type, std::string_view function, Generator::Next next);

// The items of a value one at a time: another iterator's lazily, the rest (a list's items, a
// dict's keys, a string's characters) listed when first asked.
class ItemStream {
 public:
  explicit ItemStream(Value source) : source_(std::move(source)) {}
  std::optional<Value> next(Evaluator& ev);

 private:
  Value source_;
  std::vector<Value> items_;
  size_t pos_ = 0;
  bool listed_ = false;
};

}  // namespace ferry::jinja
