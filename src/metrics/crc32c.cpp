// CRC-32C in software (slicing-by-8 tables) and with the SSE4.2 instruction when present.
#include "src/metrics/crc32c.h"

#include <array>
#include <cstring>

#include "core/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FERRY_CRC32C_X86 1
#include <nmmintrin.h>
#endif

namespace ferry {
namespace {

// Reflected Castagnoli polynomial.
constexpr uint32_t kPolynomial = 0x82F63B78u;

// tables[k][b]: CRC of byte b followed by k zero bytes; lets the loop consume 8 bytes per step.
using SlicingTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr SlicingTables make_tables() {
  SlicingTables tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    tables[0][b] = crc;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (size_t k = 1; k < 8; ++k) {
      const uint32_t prev = tables[k - 1][b];
      tables[k][b] = (prev >> 8) ^ tables[0][prev & 0xFFu];
    }
  }
  return tables;
}

constexpr SlicingTables kTables = make_tables();

uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];  // explicit little-endian: no host assumption
  return v;
}

#ifdef FERRY_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const unsigned char* p, size_t n, uint32_t crc) {
  uint64_t state = ~crc;
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0; --n) {
    state = _mm_crc32_u8(static_cast<uint32_t>(state), *p++);
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // x86 is little-endian, which is what the instruction expects
    state = _mm_crc32_u64(state, word);
  }
  for (; n > 0; --n) state = _mm_crc32_u8(static_cast<uint32_t>(state), *p++);
  return ~static_cast<uint32_t>(state);
}

bool detect_sse42() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

}  // namespace

uint32_t crc32c_software(std::string_view data, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  uint32_t state = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t word = load_le64(p) ^ state;
    state = kTables[7][word & 0xFF] ^ kTables[6][(word >> 8) & 0xFF] ^ kTables[5][(word >> 16) & 0xFF] ^
            kTables[4][(word >> 24) & 0xFF] ^ kTables[3][(word >> 32) & 0xFF] ^
            kTables[2][(word >> 40) & 0xFF] ^ kTables[1][(word >> 48) & 0xFF] ^ kTables[0][word >> 56];
  }
  for (; n > 0; --n) state = (state >> 8) ^ kTables[0][(state ^ *p++) & 0xFFu];
  return ~state;
}

bool crc32c_hardware_available() {
#ifdef FERRY_CRC32C_X86
  static const bool available = detect_sse42();
  return available;
#else
  return false;
#endif
}

uint32_t crc32c_hardware(std::string_view data, uint32_t crc) {
  FERRY_CHECK(crc32c_hardware_available(), "crc32c_hardware called on a CPU without SSE4.2");
#ifdef FERRY_CRC32C_X86
  return crc32c_sse42(reinterpret_cast<const unsigned char*>(data.data()), data.size(), crc);
#else
  return crc;
#endif
}

uint32_t crc32c(std::string_view data, uint32_t crc) {
  return crc32c_hardware_available() ? crc32c_hardware(data, crc) : crc32c_software(data, crc);
}

namespace {
constexpr uint32_t kMaskDelta = 0xa282ead8u;
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rotated = masked - kMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace ferry
