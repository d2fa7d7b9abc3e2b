// Normalizer: the tokenizer.json `normalizer` step (null, NFC, or a Sequence of them), with the
// offset bookkeeping of the Rust `tokenizers` library: every normalized byte remembers the
// original bytes it came from, so token offsets point into the caller's text.
//
// NFC follows `tokenizers`' own algorithm (unicode_normalization_alignments): canonical
// decomposition, stable reordering of combining marks, recomposition, each output character
// tagged as replacing, inserted or absorbing input characters. That tagging decides the offsets:
// "e" + U+0301 composed to "é" keeps the offsets of the "e" alone, as it does in Python.
// Character data comes from utf8proc.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

struct JsonField;

// Original bytes [begin, end) that one normalized byte stands for.
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
};

class Normalizer {
 public:
  // From tokenizer.json's `normalizer` value (null included). InputError for other types.
  static Normalizer from_json(const nlohmann::json& normalizer, const JsonField& field);


  // Normalizes `text`, whose first byte is original byte `shift`. Returns false, touching
  // nothing, when normalizing leaves it as it is (its alignment is then the identity); else
  // fills `out` and `align` (one entry per byte of `out`).
  bool apply(std::string_view text, size_t shift, std::string& out, std::vector<ByteRange>& align) const;

  // The normalized form of `text` (for added tokens that match normalized text).
  std::string apply(std::string_view text) const;

 private:
  bool nfc_ = false;
};

}  // namespace ferry
