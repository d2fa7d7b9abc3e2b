// TokenSpan: one token of an encoding and the bytes of the input it stands for. Shared by the
// SentencePiece tokenizer (tokenizer.h) and the tokenizer.json BPE tokenizer (bpe_tokenizer.h),
// so neither needs the other's headers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry {

// One token of an encoding and the bytes of the input it stands for, [begin, end). A dummy
// prefix "▁" owns no bytes; byte-fallback pieces of one character may share its span.
struct TokenSpan {
  int64_t id = 0;
  size_t begin = 0;
  size_t end = 0;
};

}  // namespace ferry
