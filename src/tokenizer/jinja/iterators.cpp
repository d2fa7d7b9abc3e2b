// One-shot iterators (see iterators.h).
#include "src/tokenizer/jinja/iterators.h"

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/operators.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {

std::optional<Value> Generator::next(Evaluator& ev) {
  if (!next_) return std::nullopt;
  if (running_) throw Failure("ValueError: generator already executing");
  running_ = true;
  std::optional<Value> item;
  try {
    item = next_(ev);
  } catch (...) {
    running_ = false;
    next_ = nullptr;  // a Python generator that raised is finished
    throw;
  }
  running_ = false;
  if (!item) next_ = nullptr;
  return item;
}

std::string Generator::repr() const {
  const std::string at = " at " + address_text(this) + ">";
  if (type_ == "generator") return "<generator object " + std::string(function_) + at;
  return "<" + std::string(type_) + " object" + at;
}

void Generator::clear() {
  if (!running_) next_ = nullptr;
}

Value make_generator(Evaluator& ev, std::string_view type, std::string_view function, Generator::Next next) {
  auto generator = std::make_shared<Generator>(type, function, std::move(next));
  ev.track(generator);
  return Value::make_object(std::move(generator));
}

std::optional<Value> ItemStream::next(Evaluator& ev) {
  if (source_.is_object() && source_.object().is_iterator()) {
    ev.charge(1);
    return source_.object().next(ev);
  }
  if (!listed_) {
    items_ = iterate(ev, source_);
    listed_ = true;
  }
  if (pos_ >= items_.size()) return std::nullopt;
  return std::move(items_[pos_++]);
}

}  // namespace ferry::jinja
