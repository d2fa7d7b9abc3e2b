// ByteLevel: GPT-2's byte <-> character map.
#include "src/tokenizer/byte_level.h"

#include <array>

#include "src/tokenizer/utf8.h"

namespace ferry::byte_level {
namespace {

struct Alphabet {
  std::array<std::string, 256> chars;  // byte -> UTF-8 of its character
  std::array<int, 0x144> bytes;        // character (all are below U+0144) -> byte, or -1

  Alphabet() {
    bytes.fill(-1);
    // Printable ASCII and Latin-1 (less the soft hyphen) stand for themselves; the other 68 bytes
    // take U+0100, U+0101, ... in byte order (GPT-2's bytes_to_unicode).
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
      utf8::append(chars[b], c);
      bytes[c] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

}  // namespace

std::string_view char_of(unsigned char byte) { return alphabet().chars[byte]; }

std::optional<std::string> decode(std::string_view piece) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    size_t length = 0;
    if (pos + utf8::char_length(static_cast<unsigned char>(piece[pos])) > piece.size()) return std::nullopt;
    const char32_t c = utf8::decode(piece, pos, &length);
    if (c >= a.bytes.size() || a.bytes[c] < 0) return std::nullopt;
    out.push_back(static_cast<char>(a.bytes[c]));
    pos += length;
  }
  return out;
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) out.append(char_of(static_cast<unsigned char>(b)));
  return out;
}

}  // namespace ferry::byte_level
