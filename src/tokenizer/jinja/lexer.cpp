// jinja2's lexer with trim_blocks and lstrip_blocks (see lexer.h). The rules follow
// jinja2/lexer.py: the same tag patterns, the same order of alternatives, and the same
// `line_starting` state that decides whether lstrip_blocks applies to a tag with nothing but
// spaces before it since the previous tag.
#include "src/tokenizer/jinja/lexer.h"

#include <cstdio>

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/pystr.h"

namespace ferry::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int digit_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

std::string rstrip_space(std::string_view s) { return pystr::strip(s, false, true); }

bool all_space(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    if (!pystr::is_space(pystr::decode(s, pos))) return false;
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string_view::npos) {
        emit_data(src_.substr(pos_), pos_);
        break;
      }
      lex_tag(tag);
    }
    tokens_.push_back(Token{TokenType::eof, static_cast<uint32_t>(src_.size()), {}});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& message) { throw SyntaxFailure(at, message); }

  size_t find_tag_start(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string_view::npos;
  }

  bool at(size_t i, std::string_view s) const { return src_.substr(i, s.size()) == s; }

  size_t skip_space(size_t i) const {
    while (i < src_.size()) {
      size_t next = i;
      if (!pystr::is_space(pystr::decode(src_, next))) break;
      i = next;
    }
    return i;
  }

  void emit_data(std::string_view text, size_t offset) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::data, static_cast<uint32_t>(offset), std::string(text)});
  }

  void emit(TokenType type, size_t offset, std::string text = {}) {
    tokens_.push_back(Token{type, static_cast<uint32_t>(offset), std::move(text)});
  }

  // The text before a tag, with the whitespace control of the tag's sign applied.
  void emit_text_before(size_t tag, char sign, bool lstrip_allowed) {
    std::string_view text = src_.substr(pos_, tag - pos_);
    std::string stripped;
    if (sign == '-') {
      stripped = rstrip_space(text);
      text = stripped;
    } else if (sign != '+' && lstrip_allowed) {
      const size_t line_start = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
      if ((line_start > 0 || line_starting_) && line_start < text.size() && all_space(text.substr(line_start))) {
        text = text.substr(0, line_start);
      }
    }
    emit_data(text, pos_);
  }

  // Consumes a tag end that matched at `i` with `length` bytes; `strip_after` eats whitespace
  // after it (`-%}`), `trim_newline` one newline (trim_blocks).
  void finish_tag(size_t i, size_t length, bool strip_after, bool trim_newline) {
    size_t end = i + length;
    if (strip_after) end = skip_space(end);
    if (trim_newline && end < src_.size() && src_[end] == '\n') ++end;
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    pos_ = end;
  }

  void lex_tag(size_t tag) {
    const char kind = src_[tag + 1];
    size_t after = tag + 2;
    char sign = 0;
    if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
    if (kind == '%') {
      size_t raw_body = 0;
      if (match_raw_begin(after, raw_body)) {
        emit_text_before(tag, sign, true);
        line_starting_ = src_[raw_body - 1] == '\n';
        pos_ = raw_body;
        lex_raw(tag);
        return;
      }
    }
    emit_text_before(tag, sign, kind != '{');
    line_starting_ = false;
    pos_ = after;
    if (kind == '#') {
      lex_comment(tag);
    } else {
      lex_expression_tag(tag, kind == '%');
    }
  }

  // `{%` sign `\s* raw \s* (-%}\s* | %})`; on a match, raw_body is where the raw text begins.
  bool match_raw_begin(size_t after, size_t& raw_body) const {
    size_t i = skip_space(after);
    if (!at(i, "raw")) return false;
    i = skip_space(i + 3);
    if (at(i, "-%}")) {
      raw_body = skip_space(i + 3);
      return true;
    }
    if (at(i, "%}")) {
      raw_body = i + 2;
      return true;
    }
    return false;
  }

  void lex_raw(size_t begin) {
    for (size_t i = src_.find("{%", pos_); i != std::string_view::npos; i = src_.find("{%", i + 1)) {
      size_t j = i + 2;
      char sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
      j = skip_space(j);
      if (!at(j, "endraw")) continue;
      j = skip_space(j + 6);
      if (!at(j, "+%}") && !at(j, "-%}") && !at(j, "%}")) continue;
      emit_text_before(i, sign, true);
      if (at(j, "+%}")) {
        finish_tag(j, 3, false, false);
      } else if (at(j, "-%}")) {
        finish_tag(j, 3, true, false);
      } else {
        finish_tag(j, 2, false, true);
      }
      return;
    }
    fail(begin, "Missing end of raw directive");
  }

  void lex_comment(size_t begin) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) fail(begin, "Missing end of comment tag");
    const char sign = end > pos_ ? src_[end - 1] : 0;
    if (sign == '+') {
      finish_tag(end, 2, false, false);
    } else if (sign == '-') {
      finish_tag(end, 2, true, false);
    } else {
      finish_tag(end, 2, false, true);
    }
  }

  // The end of a `{% %}` or `{{ }}` tag at pos_, if one is there.
  bool match_tag_end(bool block) {
    if (!balance_.empty()) return false;
    if (block) {
      if (at(pos_, "+%}")) return finish_tag(pos_, 3, false, false), true;
      if (at(pos_, "-%}")) return finish_tag(pos_, 3, true, false), true;
      if (at(pos_, "%}")) return finish_tag(pos_, 2, false, true), true;
      return false;
    }
    if (at(pos_, "-}}")) return finish_tag(pos_, 3, true, false), true;
    if (at(pos_, "}}")) return finish_tag(pos_, 2, false, false), true;
    return false;
  }

  void lex_expression_tag(size_t begin, bool block) {
    emit(block ? TokenType::block_begin : TokenType::variable_begin, begin);
    while (true) {
      if (pos_ >= src_.size()) {
        fail(begin, std::string("unexpected end of template: the tag is not closed with '") + (block ? "%}" : "}}") + "'");
      }
      const size_t start = pos_;
      if (match_tag_end(block)) {
        emit(block ? TokenType::block_end : TokenType::variable_end, start);
        return;
      }
      const size_t spaced = skip_space(pos_);
      if (spaced > pos_) {
        pos_ = spaced;
        continue;
      }
      if (!lex_number() && !lex_name() && !lex_string() && !lex_operator()) {
        char shown[16];
        const auto byte = static_cast<unsigned char>(src_[pos_]);
        std::snprintf(shown, sizeof shown, byte < 0x80 && byte >= 0x20 ? "'%c'" : "byte 0x%02x", byte);
        fail(pos_, std::string("unexpected char ") + shown);
      }
    }
  }

  // `(\d+_)*\d+`: the end of a digit run with single underscores between digits, or npos.
  size_t digit_run(size_t i) const {
    if (i >= src_.size() || !is_digit(src_[i])) return std::string_view::npos;
    while (i < src_.size()) {
      if (is_digit(src_[i])) {
        ++i;
      } else if (src_[i] == '_' && i + 1 < src_.size() && is_digit(src_[i + 1])) {
        i += 2;
      } else {
        break;
      }
    }
    return i;
  }

  size_t exponent_end(size_t i) const {
    if (i >= src_.size() || (src_[i] != 'e' && src_[i] != 'E')) return std::string_view::npos;
    ++i;
    if (i < src_.size() && (src_[i] == '+' || src_[i] == '-')) ++i;
    return digit_run(i);
  }

  // jinja2's float_re: digits, then (.digits)? e[+-]digits, or .digits; never right after a '.'.
  size_t float_end(size_t i) const {
    if (i > 0 && src_[i - 1] == '.') return std::string_view::npos;
    const size_t whole = digit_run(i);
    if (whole == std::string_view::npos) return whole;
    const size_t frac = whole < src_.size() && src_[whole] == '.' ? digit_run(whole + 1) : std::string_view::npos;
    if (frac != std::string_view::npos) {
      const size_t exp = exponent_end(frac);
      return exp != std::string_view::npos ? exp : frac;
    }
    return exponent_end(whole);
  }

  // jinja2's integer_re: 0b.., 0o.., 0x.. (single underscores allowed), [1-9](_?\d)*, 0(_?0)*.
  size_t integer_end(size_t i, int& base) const {
    auto run = [&](size_t j, int b) {
      size_t k = j;
      while (k < src_.size()) {
        const bool underscore = src_[k] == '_';
        const size_t d = underscore ? k + 1 : k;
        if (d >= src_.size() || digit_value(src_[d]) >= b) break;
        k = d + 1;
      }
      return k;
    };
    base = 10;
    if (src_[i] == '0' && i + 1 < src_.size()) {
      const char p = static_cast<char>(src_[i + 1] | 0x20);
      const int prefixed = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 0;
      if (prefixed) {
        const size_t end = run(i + 2, prefixed);
        if (end > i + 2) {
          base = prefixed;
          return end;
        }
      }
    }
    if (src_[i] >= '1' && src_[i] <= '9') return run(i + 1, 10);
    size_t end = i + 1;
    while (end < src_.size() && (src_[end] == '0' || (src_[end] == '_' && end + 1 < src_.size() && src_[end + 1] == '0'))) {
      end += src_[end] == '_' ? 2 : 1;
    }
    return end;
  }

  bool lex_number() {
    if (!is_digit(src_[pos_])) return false;
    std::string digits;
    const size_t fend = float_end(pos_);
    if (fend != std::string_view::npos) {
      for (char c : src_.substr(pos_, fend - pos_)) {
        if (c != '_') digits += c;
      }
      Token token{TokenType::floating, static_cast<uint32_t>(pos_), {}};
      token.float_value = std::strtod(digits.c_str(), nullptr);
      tokens_.push_back(std::move(token));
      pos_ = fend;
      return true;
    }
    int base = 10;
    const size_t iend = integer_end(pos_, base);
    const size_t digits_from = base == 10 ? pos_ : pos_ + 2;
    uint64_t value = 0;
    for (char c : src_.substr(digits_from, iend - digits_from)) {
      if (c == '_') continue;
      if (__builtin_mul_overflow(value, static_cast<uint64_t>(base), &value) ||
          __builtin_add_overflow(value, static_cast<uint64_t>(digit_value(c)), &value) || value > INT64_MAX) {
        fail(pos_, "integer literal beyond 64 bits");
      }
    }
    Token token{TokenType::integer, static_cast<uint32_t>(pos_), {}};
    token.int_value = static_cast<int64_t>(value);
    tokens_.push_back(std::move(token));
    pos_ = iend;
    return true;
  }

  bool lex_name() {
    if (!is_name_start(src_[pos_])) return false;
    size_t end = pos_ + 1;
    while (end < src_.size() && is_name_char(src_[end])) ++end;
    emit(TokenType::name, pos_, std::string(src_.substr(pos_, end - pos_)));
    pos_ = end;
    return true;
  }

  bool lex_string() {
    const char quote = src_[pos_];
    if (quote != '\'' && quote != '"') return false;
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) return false;  // unterminated: "unexpected char" as in jinja2
    emit(TokenType::string, pos_, unescape(src_.substr(pos_ + 1, i - pos_ - 1), pos_));
    pos_ = i + 1;
    return true;
  }

  // Python's unicode-escape decoding, as jinja2 applies it to string literals.
  std::string unescape(std::string_view body, size_t at_offset) {
    std::string out;
    for (size_t i = 0; i < body.size();) {
      if (body[i] != '\\') {
        out += body[i++];
        continue;
      }
      ++i;
      const char c = body[i];
      if (static_cast<unsigned char>(c) >= 0x80) {
        // jinja2 backslash-escapes non-ASCII text before decoding: `\é` is `\\xe9`.
        size_t next = i;
        const char32_t ch = pystr::decode(body, next);
        char buf[16];
        std::snprintf(buf, sizeof buf, ch <= 0xFF ? "\\x%02x" : ch <= 0xFFFF ? "\\u%04x" : "\\U%08x",
                      static_cast<unsigned>(ch));
        out += buf;
        i = next;
        continue;
      }
      ++i;
      switch (c) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': out += hex_escape(body, i, 2, at_offset); break;
        case 'u': out += hex_escape(body, i, 4, at_offset); break;
        case 'U': out += hex_escape(body, i, 8, at_offset); break;
        case 'N': fail(at_offset, "\\N{...} escapes are not supported");
        default:
          if (c >= '0' && c <= '7') {
            char32_t v = static_cast<char32_t>(c - '0');
            for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k) {
              v = v * 8 + static_cast<char32_t>(body[i++] - '0');
            }
            pystr::append(out, v);
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    return out;
  }

  std::string hex_escape(std::string_view body, size_t& i, int digits, size_t at_offset) {
    char32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i) {
      if (i >= body.size() || digit_value(body[i]) > 15) {
        fail(at_offset, digits == 2 ? "truncated \\xXX escape" : digits == 4 ? "truncated \\uXXXX escape"
                                                                          : "truncated \\UXXXXXXXX escape");
      }
      v = v * 16 + static_cast<char32_t>(digit_value(body[i]));
    }
    if (v > 0x10FFFF) fail(at_offset, "illegal Unicode character");
    if (v >= 0xD800 && v <= 0xDFFF) fail(at_offset, "surrogate code points are not supported in string literals");
    return pystr::encode(v);
  }

  bool lex_operator() {
    static constexpr std::string_view two[] = {"**", "//", "==", "!=", ">=", "<="};
    for (std::string_view op : two) {
      if (at(pos_, op)) {
        emit(TokenType::op, pos_, std::string(op));
        pos_ += 2;
        return true;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) return false;
    balance(c);
    emit(TokenType::op, pos_, std::string(1, c));
    ++pos_;
    return true;
  }

  void balance(char c) {
    if (c == '(' || c == '[' || c == '{') {
      balance_.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance_.empty()) fail(pos_, std::string("unexpected '") + c + "'");
      if (balance_.back() != c) fail(pos_, std::string("unexpected '") + c + "', expected '" + balance_.back() + "'");
      balance_.pop_back();
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::string balance_;
  std::vector<Token> tokens_;
};

}  // namespace

std::string normalize_source(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      out += '\n';
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      out += raw[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace ferry::jinja
