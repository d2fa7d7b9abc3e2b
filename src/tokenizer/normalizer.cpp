// Normalizer: null / NFC / Sequence, with tokenizers-compatible alignments.
#include "src/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <vector>

#include "src/tokenizer/tokenizer_json.h"
#include "src/tokenizer/utf8.h"

namespace ferry {
namespace {

constexpr char32_t kMaxCodePoint = 0x110000;

// Characters NFC may change or join with their neighbour: combining marks, characters with a
// canonical decomposition, characters that appear after the first in one (the "second" of a
// composition, e.g. U+0B3E), and Hangul vowel and trailing jamo. A string without any of them is
// already NFC, so the usual text (ASCII, CJK, emoji) skips the algorithm.
class NfcSensitive {
 public:
  NfcSensitive() : bits_(kMaxCodePoint / 64 + 1, 0) {
    for (char32_t c = 0x80; c < kMaxCodePoint; ++c) {
      const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
      if (p->combining_class != 0) set(c);
      if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) {  // canonical decomposition
        set(c);
        utf8proc_int32_t parts[8];
        int last_boundclass = 0;
        const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), parts, 8, UTF8PROC_DECOMPOSE,
                                               &last_boundclass);
        for (utf8proc_ssize_t i = 1; i < n && i < 8; ++i) set(static_cast<char32_t>(parts[i]));
      }
    }
    for (char32_t c = 0x1161; c <= 0x1175; ++c) set(c);  // Hangul V jamo
    for (char32_t c = 0x11A8; c <= 0x11C2; ++c) set(c);  // Hangul T jamo
  }

  bool operator()(char32_t c) const { return c < kMaxCodePoint && (bits_[c / 64] >> (c % 64)) & 1; }

 private:
  void set(char32_t c) { bits_[c / 64] |= uint64_t{1} << (c % 64); }
  std::vector<uint64_t> bits_;
};

const NfcSensitive& nfc_sensitive() {
  static const NfcSensitive table;
  return table;
}

int combining_class(char32_t c) {
  return c < 0x300 ? 0 : utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
}

// The primary composite of starter `a` and `b`, or 0.
char32_t compose(char32_t a, char32_t b) {
  utf8proc_int32_t pair[2] = {static_cast<utf8proc_int32_t>(a), static_cast<utf8proc_int32_t>(b)};
  const auto n = utf8proc_normalize_utf32(pair, 2, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
  return n == 1 ? static_cast<char32_t>(pair[0]) : 0;
}

// One character of a normalization stream and its change tag: 0 replaces the next input
// character, 1 is inserted after the previous one, -n replaces the next one and absorbs n more.
struct Tagged {
  char32_t c;
  long change;
};

// Canonical decomposition with combining marks stably sorted by class between starters.
std::vector<Tagged> decompose(const std::vector<char32_t>& input) {
  std::vector<Tagged> out;
  out.reserve(input.size() + 4);
  size_t run_start = 0;  // first character of the run not yet sorted
  auto sort_run = [&] {
    std::stable_sort(out.begin() + static_cast<long>(run_start), out.end(), [](const Tagged& x, const Tagged& y) {
      return combining_class(x.c) < combining_class(y.c);
    });
    run_start = out.size();
  };
  for (const char32_t c : input) {
    utf8proc_int32_t parts[32];
    int last_boundclass = 0;
    auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), parts, 32, UTF8PROC_DECOMPOSE, &last_boundclass);
    if (n <= 0 || n > 32) {
      parts[0] = static_cast<utf8proc_int32_t>(c);
      n = 1;
    }
    for (utf8proc_ssize_t i = 0; i < n; ++i) {
      const auto d = static_cast<char32_t>(parts[i]);
      if (combining_class(d) == 0) sort_run();
      out.push_back({d, i == 0 ? 0 : 1});
    }
  }
  sort_run();
  return out;
}

// Canonical composition of a decomposed stream, as unicode_normalization_alignments'
// Recompositions iterator does it (including how the tags combine).
std::vector<Tagged> recompose(const std::vector<Tagged>& input) {
  std::vector<Tagged> out;
  out.reserve(input.size());
  std::vector<Tagged> blocked;  // characters kept after the composee
  bool have_composee = false;
  Tagged composee{0, 0};
  int last_class = -1;  // class of the last blocked character, -1: none
  for (const Tagged& t : input) {
    const int cls = combining_class(t.c);
    if (!have_composee) {
      if (cls != 0) {
        out.push_back(t);
        continue;
      }
      composee = t;
      have_composee = true;
      continue;
    }
    if (last_class < 0) {
      if (const char32_t r = compose(composee.c, t.c)) {
        composee = {r, composee.change + t.change - 1};
        continue;
      }
      if (cls == 0) {
        out.push_back(composee);
        composee = t;
        continue;
      }
      blocked.push_back(t);
      last_class = cls;
      continue;
    }
    if (last_class >= cls) {  // blocked from the composee
      if (cls == 0) {
        out.push_back(composee);
        out.insert(out.end(), blocked.begin(), blocked.end());
        blocked.clear();
        composee = t;
        last_class = -1;
        continue;
      }
      blocked.push_back(t);
      last_class = cls;
      continue;
    }
    if (const char32_t r = compose(composee.c, t.c)) {
      composee = {r, composee.change + t.change - 1};
      continue;
    }
    blocked.push_back(t);
    last_class = cls;
  }
  if (have_composee) out.push_back(composee);
  out.insert(out.end(), blocked.begin(), blocked.end());
  return out;
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& normalizer, const JsonField& field) {
  Normalizer out;
  if (normalizer.is_null()) return out;
  const std::string type = json_type(normalizer, field);
  if (type == "NFC") {
    out.nfc_ = true;
  } else if (type == "Sequence") {
    const auto it = normalizer.find("normalizers");
    if (it == normalizer.end() || !it->is_array()) field.at("normalizers").fail("must be a list of normalizers");
    for (size_t i = 0; i < it->size(); ++i) {
      // NFC is idempotent: a sequence of NFCs is one NFC.
      out.nfc_ = from_json((*it)[i], field.at("normalizers").at(i)).nfc_ || out.nfc_;
    }
  } else {
    field.at("type").unsupported(type, {"NFC", "Sequence"});
  }
  return out;
}

bool Normalizer::apply(std::string_view text, size_t shift, std::string& out, std::vector<ByteRange>& align) const {
  if (!nfc_) return false;
  // Fast path: nothing NFC touches (checks every character, decoding only non-ASCII ones).
  const NfcSensitive& sensitive = nfc_sensitive();
  bool touched = false;
  for (size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t length = 0;
    if (sensitive(utf8::decode(text, pos, &length))) {
      touched = true;
      break;
    }
    pos += length;
  }
  if (!touched) return false;

  std::vector<char32_t> chars;
  std::vector<ByteRange> char_align;  // original range of each input character
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    chars.push_back(utf8::decode(text, pos, &length));
    char_align.push_back({shift + pos, shift + pos + length});
    pos += length;
  }
  const std::vector<Tagged> normalized = recompose(decompose(chars));

  // Alignments as NormalizedString::transform assigns them: a replacing character takes the
  // range of the input character it replaces, an inserted one that of the previous character.
  out.clear();
  align.clear();
  size_t next = 0;  // next input character not consumed
  for (const Tagged& t : normalized) {
    ByteRange range{shift, shift};
    if (t.change > 0) {
      if (next > 0) range = char_align[std::min(next, chars.size()) - 1];
    } else {
      range = char_align[std::min(next, chars.size() - 1)];
      next += 1 + static_cast<size_t>(-t.change);
    }
    const size_t before = out.size();
    utf8::append(out, t.c);
    align.insert(align.end(), out.size() - before, range);
  }
  if (out == text) {
    // NFC left the characters as they were (a mark already in order): identity alignment.
    bool identity = true;
    for (size_t i = 0; i < align.size() && identity; ++i) {
      identity = align[i].begin <= shift + i && shift + i < align[i].end;
    }
    if (identity) return false;
  }
  return true;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out;
  std::vector<ByteRange> align;
  return apply(text, 0, out, align) ? out : std::string(text);
}

}  // namespace ferry
