// jinja2's constant folding, where it changes what renders. jinja2's compiler evaluates each
// expression it can without the render context (no variables, calls or filters that take the
// context; lazily: `false and x` folds without x) and writes the value into its code when it is
// plain data; a printed expression is written as its text whatever the value. That evaluation
// goes through jinja2's getitem, which turns a failed slice into Undefined, so `{{ (none)[1:] }}`
// renders '' where `{{ x[1:] }}` raises for x = None. Anything else folds to what rendering gives
// anyway, so only expressions holding a slice are folded here.
#pragma once

#include "src/tokenizer/jinja/ast.h"

namespace ferry::jinja {

// Replaces foldable expressions of `body` by their values, printed ones by their text.
void fold_constant_slices(Body& body);

}  // namespace ferry::jinja
