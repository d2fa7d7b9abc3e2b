// How many rows of logits the chunked LM head (chunked_lm_head.h) computes at a time when
// train.logits_chunk is -1 (auto). Torch-free: the memory model sizes the head with it too.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ferry::kernels {

// Rows per chunk for `rows` rows of width C under a vocabulary V, as Liger's fused linear +
// cross-entropy sizes them: ceil(V / C) chunks, so that one chunk's logits are about as large as
// the hidden states themselves; rounded up to a power of two, and at least kMinAutoChunk rows:
// each chunk adds its product into the head weight's whole gradient (V × C), so small chunks make
// that accumulation, not the GEMMs, the cost — at 4 × 1024 tokens of a 152k vocabulary on the CPU,
// 32-row chunks took 1.5× the unchunked step, 256-row chunks 0.6× (scripts/bench-memory.sh).
inline constexpr int64_t kMinAutoChunk = 256;

inline int64_t auto_logits_chunk(int64_t rows, int64_t vocab, int64_t width) {
  const int64_t chunks = std::max<int64_t>(1, (vocab + width - 1) / std::max<int64_t>(width, 1));
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  int64_t power = 1;
  while (power < per_chunk) power *= 2;
  return std::max(power, kMinAutoChunk);
}

}  // namespace ferry::kernels
