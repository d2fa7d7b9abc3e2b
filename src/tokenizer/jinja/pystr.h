// Python's str semantics on UTF-8 bytes: templates index, slice, measure, strip, split and
// change the case of strings by Unicode code point, as Python does. Text is never assumed to be
// valid UTF-8: a byte that does not start a well-formed character counts as one character of
// its own (as Python's surrogateescape would read it), so hostile input cannot make a read run
// past the end of a string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::jinja::pystr {

// The character at s[pos], advancing pos past it (by at least one byte).
char32_t decode(std::string_view s, size_t& pos);
// The character that ends at s[end - 1], moving end to its first byte.
char32_t decode_before(std::string_view s, size_t& end);
void append(std::string& out, char32_t c);
std::string encode(char32_t c);

bool is_ascii(std::string_view s);
size_t length(std::string_view s);  // in characters
// Byte offsets of every character, and s.size() at the end (size length(s) + 1).
std::vector<size_t> char_offsets(std::string_view s);
std::vector<char32_t> chars(std::string_view s);

// Python's slice arithmetic (PySlice_AdjustIndices) over a sequence of `length` items: the first
// index, the step and how many items the slice takes. Throws Failure for a zero step.
struct SliceRange {
  int64_t start, step, count;
};
SliceRange adjust_slice(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                        std::optional<int64_t> step);
// A Python index (negative counts from the end) into `length` items, or nullopt when outside.
std::optional<size_t> adjust_index(int64_t length, int64_t index);

std::string slice(std::string_view s, const SliceRange& range);
std::string char_at(std::string_view s, size_t index);  // index < length(s)

// Unicode classes as Python's str methods see them.
bool is_space(char32_t c);      // str.isspace(), and `\s` in Python's re
bool is_printable(char32_t c);  // str.isprintable(): what repr() leaves unescaped
bool is_line_break(char32_t c); // str.splitlines() boundaries

// str.strip / lstrip / rstrip; `chars` nullptr strips whitespace.
std::string strip(std::string_view s, bool left, bool right, const std::string* chars = nullptr);
// str.split / rsplit; `sep` nullptr splits on runs of whitespace. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// str.replace; count < 0 replaces all. An empty `old` inserts `repl` around every character.
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// str.count / str.find / str.rfind over characters [start, end) (already adjusted).
int64_t count(std::string_view s, std::string_view sub, int64_t start, int64_t end);
int64_t find(std::string_view s, std::string_view sub, int64_t start, int64_t end, bool reverse);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string casefold(std::string_view s);
std::string swapcase(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize: first character title-cased, rest lower
std::string title(std::string_view s);       // str.title
std::string title_word(std::string_view s);  // one word as Jinja's |title writes it: s[0].upper() + s[1:].lower()

// str.isdigit() and friends: true when s is not empty and every character qualifies.
enum class CharClass { digit, decimal, numeric, alpha, alnum, space, ascii, printable };
bool all_chars(std::string_view s, CharClass cls);
bool is_lower(std::string_view s);
bool is_upper(std::string_view s);
bool is_title(std::string_view s);

}  // namespace ferry::jinja::pystr
