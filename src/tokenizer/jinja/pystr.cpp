// Python's str semantics on UTF-8 bytes (see pystr.h). Case mappings and character classes come
// from utf8proc; the few full case mappings Python applies that utf8proc's simple ones lack
// (ß -> SS, the Latin ligatures, İ -> i̇, a word-final sigma) are written out here.
#include "src/tokenizer/jinja/pystr.h"

#include <utf8proc.h>

#include <algorithm>

#include "src/tokenizer/jinja/template_error.h"

namespace ferry::jinja::pystr {
namespace {

// A byte that starts no well-formed character decodes to U+DC80..U+DCFF (Python's
// surrogateescape), and encodes back to that byte.
constexpr char32_t kEscapeBase = 0xDC00;

bool is_escaped_byte(char32_t c) { return c >= 0xDC80 && c <= 0xDCFF; }

utf8proc_category_t category(char32_t c) {
  if (is_escaped_byte(c)) return UTF8PROC_CATEGORY_CS;
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

bool is_letter_category(utf8proc_category_t cat) {
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO;
}

char32_t simple_upper(char32_t c) {
  return is_escaped_byte(c) ? c : static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
char32_t simple_lower(char32_t c) {
  return is_escaped_byte(c) ? c : static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
char32_t simple_title(char32_t c) {
  return is_escaped_byte(c) ? c : static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

bool is_cased(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
         simple_lower(c) != c || simple_upper(c) != c;
}

bool is_case_ignorable(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK || c == '\'' || c == '.' || c == ':' ||
         c == '^' || c == '`' || c == 0xB7 || c == 0x2019;
}

// Full upper-case mappings (Unicode SpecialCasing) that differ from the simple one.
const char* special_upper(char32_t c) {
  switch (c) {
    case 0xDF: return "SS";
    case 0x149: return "\u02BCN";
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05:
    case 0xFB06: return "ST";
    default: return nullptr;
  }
}

const char* special_title(char32_t c) {
  switch (c) {
    case 0xDF: return "Ss";
    case 0xFB00: return "Ff";
    case 0xFB01: return "Fi";
    case 0xFB02: return "Fl";
    case 0xFB03: return "Ffi";
    case 0xFB04: return "Ffl";
    case 0xFB05:
    case 0xFB06: return "St";
    default: return nullptr;
  }
}

void append_upper(std::string& out, char32_t c) {
  if (const char* s = special_upper(c)) {
    out += s;
  } else {
    append(out, simple_upper(c));
  }
}

void append_title(std::string& out, char32_t c) {
  if (const char* s = special_title(c)) {
    out += s;
  } else {
    append(out, simple_title(c));
  }
}

// Python's lower() of the character at chars[i]: İ gains a combining dot, and a capital sigma
// that ends a word becomes the final form ς.
void append_lower_at(std::string& out, const std::vector<char32_t>& chars, size_t i) {
  const char32_t c = chars[i];
  if (c == 0x130) {
    out += "i\u0307";
    return;
  }
  if (c == 0x3A3) {
    size_t j = i;
    while (j > 0 && is_case_ignorable(chars[j - 1])) --j;
    const bool after_cased = j > 0 && is_cased(chars[j - 1]);
    size_t k = i + 1;
    while (k < chars.size() && is_case_ignorable(chars[k])) ++k;
    const bool before_cased = k < chars.size() && is_cased(chars[k]);
    out += (after_cased && !before_cased) ? "\u03C2" : "\u03C3";
    return;
  }
  append(out, simple_lower(c));
}

bool in_set(char32_t c, const std::vector<char32_t>& set) {
  return std::find(set.begin(), set.end(), c) != set.end();
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t next = pos;
    if (!is_space(decode(s, next))) break;
    pos = next;
  }
  return pos;
}

size_t skip_space_back(std::string_view s, size_t end) {
  while (end > 0) {
    size_t prev = end;
    if (!is_space(decode_before(s, prev))) break;
    end = prev;
  }
  return end;
}

size_t skip_word(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t next = pos;
    if (is_space(decode(s, next))) break;
    pos = next;
  }
  return pos;
}

size_t skip_word_back(std::string_view s, size_t end) {
  while (end > 0) {
    size_t prev = end;
    if (is_space(decode_before(s, prev))) break;
    end = prev;
  }
  return end;
}

std::vector<std::string> split_space(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t pos = skip_space(s, 0);
  while (pos < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.emplace_back(s.substr(pos));  // the rest keeps its trailing whitespace, as in Python
      break;
    }
    const size_t end = skip_word(s, pos);
    parts.emplace_back(s.substr(pos, end - pos));
    pos = skip_space(s, end);
  }
  return parts;
}

std::vector<std::string> rsplit_space(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t end = skip_space_back(s, s.size());
  while (end > 0) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.emplace_back(s.substr(0, end));
      break;
    }
    const size_t start = skip_word_back(s, end);
    parts.emplace_back(s.substr(start, end - start));
    end = skip_space_back(s, start);
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

void check_separator(const std::string& sep) {
  if (sep.empty()) throw Failure("ValueError: empty separator");
}

// Byte offset of character index `index` (clamped to the end).
size_t byte_at(std::string_view s, int64_t index) {
  if (index <= 0) return 0;
  if (is_ascii(s)) return std::min(static_cast<size_t>(index), s.size());
  size_t pos = 0;
  for (int64_t i = 0; i < index && pos < s.size(); ++i) decode(s, pos);
  return pos;
}

int64_t char_index(std::string_view s, size_t byte) {
  if (is_ascii(s)) return static_cast<int64_t>(byte);
  return static_cast<int64_t>(length(s.substr(0, byte)));
}

}  // namespace

char32_t decode(std::string_view s, size_t& pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char b0 = p[pos];
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  size_t n = 0;
  char32_t c = 0, min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2, c = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3, c = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4, c = b0 & 0x07, min = 0x10000;
  }
  bool ok = n > 0 && pos + n <= s.size();
  for (size_t i = 1; ok && i < n; ++i) {
    ok = (p[pos + i] & 0xC0) == 0x80;
    c = (c << 6) | (p[pos + i] & 0x3F);
  }
  if (!ok || c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
    ++pos;
    return kEscapeBase | b0;
  }
  pos += n;
  return c;
}

char32_t decode_before(std::string_view s, size_t& end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t pos = start;
  const char32_t c = decode(s, pos);
  if (pos == end) {
    end = start;
    return c;
  }
  --end;  // the last byte is not the end of a well-formed character: it is one of its own
  return kEscapeBase | static_cast<unsigned char>(s[end]);
}

void append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (is_escaped_byte(c)) {
    out.push_back(static_cast<char>(c & 0xFF));
  } else if (c < 0x800) {
    const char bytes[] = {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
    out.append(bytes, 2);
  } else if (c < 0x10000) {
    const char bytes[] = {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
                          static_cast<char>(0x80 | (c & 0x3F))};
    out.append(bytes, 3);
  } else {
    const char bytes[] = {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
                          static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
    out.append(bytes, 4);
  }
}

std::string encode(char32_t c) {
  std::string out;
  append(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  for (const char ch : s) {
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  }
  return true;
}

size_t length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) decode(s, pos);
  return n;
}

std::vector<size_t> char_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  size_t pos = 0;
  while (pos < s.size()) {
    offsets.push_back(pos);
    decode(s, pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

std::vector<char32_t> chars(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) out.push_back(decode(s, pos));
  return out;
}

SliceRange adjust_slice(int64_t length, std::optional<int64_t> start_arg, std::optional<int64_t> stop_arg,
                        std::optional<int64_t> step_arg) {
  const int64_t step = step_arg.value_or(1);
  if (step == 0) throw Failure("ValueError: slice step cannot be zero");
  const bool forward = step > 0;
  auto clamp = [&](std::optional<int64_t> arg, int64_t fallback) {
    if (!arg) return fallback;
    int64_t v = *arg;
    if (v < 0) {
      v += length;
      if (v < 0) v = forward ? 0 : -1;
    } else if (v >= length) {
      v = forward ? length : length - 1;
    }
    return v;
  };
  const int64_t start = clamp(start_arg, forward ? 0 : length - 1);
  const int64_t stop = clamp(stop_arg, forward ? length : -1);
  int64_t count = 0;
  if (forward && stop > start) count = (stop - start - 1) / step + 1;
  if (!forward && start > stop) count = (start - stop - 1) / (-step) + 1;
  return {start, step, count};
}

std::optional<size_t> adjust_index(int64_t length, int64_t index) {
  if (index < 0) index += length;
  if (index < 0 || index >= length) return std::nullopt;
  return static_cast<size_t>(index);
}

std::string slice(std::string_view s, const SliceRange& range) {
  if (range.count <= 0) return {};
  if (is_ascii(s)) {
    if (range.step == 1) return std::string(s.substr(static_cast<size_t>(range.start), static_cast<size_t>(range.count)));
    std::string out;
    out.reserve(static_cast<size_t>(range.count));
    for (int64_t k = 0, i = range.start; k < range.count; ++k, i += range.step) out.push_back(s[static_cast<size_t>(i)]);
    return out;
  }
  const std::vector<size_t> offsets = char_offsets(s);
  if (range.step == 1) {
    const size_t from = offsets[static_cast<size_t>(range.start)];
    return std::string(s.substr(from, offsets[static_cast<size_t>(range.start + range.count)] - from));
  }
  std::string out;
  for (int64_t k = 0, i = range.start; k < range.count; ++k, i += range.step) {
    const size_t from = offsets[static_cast<size_t>(i)];
    out.append(s.substr(from, offsets[static_cast<size_t>(i) + 1] - from));
  }
  return out;
}

std::string char_at(std::string_view s, size_t index) {
  if (is_ascii(s)) return std::string(1, s[index]);
  const size_t from = byte_at(s, static_cast<int64_t>(index));
  size_t to = from;
  decode(s, to);
  return std::string(s.substr(from, to - from));
}

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::string strip(std::string_view s, bool left, bool right, const std::string* chars_arg) {
  const std::vector<char32_t> set = chars_arg ? chars(*chars_arg) : std::vector<char32_t>{};
  auto strippable = [&](char32_t c) { return chars_arg ? in_set(c, set) : is_space(c); };
  size_t begin = 0, end = s.size();
  while (left && begin < end) {
    size_t next = begin;
    if (!strippable(decode(s, next))) break;
    begin = next;
  }
  while (right && end > begin) {
    size_t prev = end;
    if (!strippable(decode_before(s, prev))) break;
    end = prev;
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (!sep) return split_space(s, maxsplit);
  check_separator(*sep);
  std::vector<std::string> parts;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
  }
  parts.emplace_back(s.substr(pos));
  return parts;
}

std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (!sep) return rsplit_space(s, maxsplit);
  check_separator(*sep);
  std::vector<std::string> parts;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  size_t start = 0, pos = 0;
  while (pos < s.size()) {
    const size_t at = pos;
    const char32_t c = decode(s, pos);
    if (!is_line_break(c)) continue;
    if (c == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    lines.emplace_back(s.substr(start, (keepends ? pos : at) - start));
    start = pos;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    size_t pos = 0;
    while (pos <= s.size()) {
      if (count < 0 || done < count) {
        out.append(repl);
        ++done;
      }
      if (pos == s.size()) break;
      const size_t from = pos;
      decode(s, pos);
      out.append(s.substr(from, pos - from));
    }
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t count(std::string_view s, std::string_view sub, int64_t start, int64_t end) {
  const int64_t len = static_cast<int64_t>(length(s));
  end = std::min(end, len);
  start = std::max<int64_t>(start, 0);
  if (start > end) return 0;
  if (sub.empty()) return end - start + 1;
  const std::string_view range = s.substr(byte_at(s, start), byte_at(s, end) - byte_at(s, start));
  int64_t n = 0;
  for (size_t pos = range.find(sub); pos != std::string_view::npos; pos = range.find(sub, pos + sub.size())) ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub, int64_t start, int64_t end, bool reverse) {
  const int64_t len = static_cast<int64_t>(length(s));
  end = std::min(end, len);
  start = std::max<int64_t>(start, 0);
  if (start > end) return -1;
  const size_t from = byte_at(s, start);
  const std::string_view range = s.substr(from, byte_at(s, end) - from);
  const size_t hit = reverse ? range.rfind(sub) : range.find(sub);
  if (hit == std::string_view::npos) return -1;
  return char_index(s, from + hit);
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) append_upper(out, decode(s, pos));
  return out;
}

std::string lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& ch : out) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    return out;
  }
  const std::vector<char32_t> cs = chars(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < cs.size(); ++i) append_lower_at(out, cs, i);
  return out;
}

std::string casefold(std::string_view s) { return replace(lower(s), "\u00DF", "ss", -1); }

std::string swapcase(std::string_view s) {
  const std::vector<char32_t> cs = chars(s);
  std::string out;
  for (size_t i = 0; i < cs.size(); ++i) {
    const auto cat = category(cs[i]);
    if (cat == UTF8PROC_CATEGORY_LU) {
      append_lower_at(out, cs, i);
    } else if (cat == UTF8PROC_CATEGORY_LL) {
      append_upper(out, cs[i]);
    } else {
      append(out, cs[i]);
    }
  }
  return out;
}

std::string capitalize(std::string_view s) {
  const std::vector<char32_t> cs = chars(s);
  std::string out;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (i == 0) {
      append_title(out, cs[i]);
    } else {
      append_lower_at(out, cs, i);
    }
  }
  return out;
}

std::string title(std::string_view s) {
  const std::vector<char32_t> cs = chars(s);
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (previous_cased) {
      append_lower_at(out, cs, i);
    } else {
      append_title(out, cs[i]);
    }
    previous_cased = is_cased(cs[i]);
  }
  return out;
}

std::string title_word(std::string_view s) {
  if (s.empty()) return {};
  size_t pos = 0;
  std::string out;
  append_upper(out, decode(s, pos));
  out += lower(s.substr(pos));
  return out;
}

bool all_chars(std::string_view s, CharClass cls) {
  if (s.empty()) return cls == CharClass::ascii || cls == CharClass::printable;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = decode(s, pos);
    const auto cat = category(c);
    const bool decimal = cat == UTF8PROC_CATEGORY_ND;
    const bool digit = decimal || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0x2070 && c <= 0x2079 && c != 0x2071 &&
                                                                          c != 0x2072 && c != 0x2073) ||
                       (c >= 0x2080 && c <= 0x2089);
    const bool numeric = digit || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
    bool ok = false;
    switch (cls) {
      case CharClass::digit: ok = digit; break;
      case CharClass::decimal: ok = decimal; break;
      case CharClass::numeric: ok = numeric; break;
      case CharClass::alpha: ok = is_letter_category(cat); break;
      case CharClass::alnum: ok = is_letter_category(cat) || numeric; break;
      case CharClass::space: ok = is_space(c); break;
      case CharClass::ascii: ok = c < 0x80; break;
      case CharClass::printable: ok = is_printable(c); break;
    }
    if (!ok) return false;
  }
  return true;
}

// str.islower() / isupper(): a character of case `want`, none of `other` case or title case.
bool only_case(std::string_view s, utf8proc_category_t want, utf8proc_category_t other) {
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const auto cat = category(decode(s, pos));
    if (cat == other || cat == UTF8PROC_CATEGORY_LT) return false;
    cased = cased || cat == want;
  }
  return cased;
}

bool is_lower(std::string_view s) { return only_case(s, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LU); }
bool is_upper(std::string_view s) { return only_case(s, UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL); }

bool is_title(std::string_view s) {
  bool cased = false, previous_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const auto cat = category(decode(s, pos));
    if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) {
      if (previous_cased) return false;
      previous_cased = cased = true;
    } else if (cat == UTF8PROC_CATEGORY_LL) {
      if (!previous_cased) return false;
      previous_cased = cased = true;
    } else {
      previous_cased = false;
    }
  }
  return cased;
}

}  // namespace ferry::jinja::pystr
