// UTF-8 helpers for the tokenizer.json tokenizer.
#include "src/tokenizer/utf8.h"

#include <utf8proc.h>

namespace ferry::utf8 {

char32_t decode(std::string_view text, size_t pos, size_t* length) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const size_t n = char_length(s[0]);
  *length = n;
  switch (n) {
    case 1: return s[0];
    case 2: return ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    case 3: return ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    default: return ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
  }
}

char32_t decode_before(std::string_view text, size_t end, size_t* length) {
  size_t start = end - 1;
  while (start > 0 && is_continuation(static_cast<unsigned char>(text[start]))) --start;
  return decode(text, start, length);
}

void append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

namespace {

// Bytes of the well-formed sequence starting at s[0] (Unicode Table 3-7), or, when it is
// ill-formed, minus the length of its maximal ill-formed prefix (at least 1).
long well_formed_length(const unsigned char* s, size_t available) {
  const unsigned char b0 = s[0];
  if (b0 < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  size_t i = 1;
  for (; i < need; ++i) {
    if (i >= available) return -static_cast<long>(i);
    const unsigned char b = s[i];
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_continuation(b);
    if (!ok) return -static_cast<long>(i);
  }
  return static_cast<long>(need);
}

}  // namespace

size_t find_invalid(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (s[pos] < 0x80) {
      ++pos;
      continue;
    }
    const long n = well_formed_length(s + pos, bytes.size() - pos);
    if (n < 0) return pos;
    pos += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

std::string lossy(std::string_view bytes) {
  if (find_invalid(bytes) == std::string_view::npos) return std::string(bytes);
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t pos = 0;
  while (pos < bytes.size()) {
    const long n = well_formed_length(s + pos, bytes.size() - pos);
    if (n > 0) {
      out.append(bytes.substr(pos, static_cast<size_t>(n)));
      pos += static_cast<size_t>(n);
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      pos += static_cast<size_t>(-n);
    }
  }
  return out;
}

bool is_white_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

}  // namespace ferry::utf8
