// Recognising a Hugging Face Jinja chat template by its normal form, and resolving
// `tokenizer.chat_template` (see chat_template_family.h).
#include "src/tokenizer/chat_template_family.h"

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "src/core/error.h"
#include "src/core/file_util.h"
#include "src/core/text.h"
#include "src/tokenizer/chat_template_path.h"
#include "src/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

enum class TagKind { variable, block, comment };

// One piece of a Jinja source: raw text (output as written) or a tag.
struct Piece {
  bool tag = false;
  std::string text;  // raw text, or a tag's compacted inside
  TagKind kind = TagKind::variable;
  char left_marker = 0, right_marker = 0;  // '-' or '+' right after the opener / before the closer
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Index just past the string literal that starts at text[pos] (a quote), or npos when unterminated.
size_t skip_literal(std::string_view text, size_t pos) {
  const char quote = text[pos];
  for (size_t i = pos + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == quote) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// A tag's inside with whitespace outside string literals removed, except one space between two
// name characters ("not x" stays two words).
std::string compact(std::string_view inside) {
  std::string out;
  size_t i = 0;
  while (i < inside.size()) {
    const char c = inside[i];
    if (c == '\'' || c == '"') {
      const size_t end = std::min(skip_literal(inside, i), inside.size());
      out.append(inside.substr(i, end - i));
      i = end;
    } else if (is_space(c)) {
      while (i < inside.size() && is_space(inside[i])) ++i;
      if (!out.empty() && is_name_char(out.back()) && i < inside.size() && is_name_char(inside[i])) out += ' ';
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// The source cut into raw text and tags. An unterminated tag ends the source as raw text (such a
// template does not compile, and will match nothing).
std::vector<Piece> lex(std::string_view source) {
  std::vector<Piece> pieces;
  size_t pos = 0;
  auto add_raw = [&](std::string_view text) {
    if (pieces.empty() || pieces.back().tag) pieces.push_back({});
    pieces.back().text.append(text);
  };
  while (pos < source.size()) {
    size_t open = pos;
    while (open + 1 < source.size() &&
           !(source[open] == '{' && (source[open + 1] == '{' || source[open + 1] == '%' || source[open + 1] == '#'))) {
      ++open;
    }
    if (open + 1 >= source.size()) {
      add_raw(source.substr(pos));
      break;
    }
    add_raw(source.substr(pos, open - pos));
    Piece tag;
    tag.tag = true;
    const char opener = source[open + 1];
    tag.kind = opener == '{' ? TagKind::variable : opener == '%' ? TagKind::block : TagKind::comment;
    const char closer = opener == '{' ? '}' : opener;  // "}}", "%}", "#}"
    size_t inside = open + 2;
    if (inside < source.size() && (source[inside] == '-' || source[inside] == '+')) tag.left_marker = source[inside++];
    size_t close = std::string_view::npos;
    for (size_t i = inside; i + 1 < source.size();) {
      if (tag.kind != TagKind::comment && (source[i] == '\'' || source[i] == '"')) {
        i = skip_literal(source, i);
        if (i == std::string_view::npos) break;
      } else if (source[i] == closer && source[i + 1] == '}') {
        close = i;
        break;
      } else {
        ++i;
      }
    }
    if (close == std::string_view::npos) {
      add_raw(source.substr(open));
      break;
    }
    size_t inside_end = close;
    if (inside_end > inside && (source[inside_end - 1] == '-' || source[inside_end - 1] == '+')) {
      tag.right_marker = source[--inside_end];
    }
    if (tag.kind != TagKind::comment) tag.text = compact(source.substr(inside, inside_end - inside));
    pieces.push_back(std::move(tag));
    pos = close + 2;
  }
  return pieces;
}

// What Jinja outputs of a raw text between `before` and `after` (either may be null), with
// trim_blocks and lstrip_blocks on, as transformers compiles chat templates. Both look at the
// source: spaces after a newline that trim_blocks removes still start a line for lstrip_blocks.
std::string output_of_raw(std::string text, const Piece* before, const Piece* after) {
  bool lstrip = false;  // lstrip_blocks: spaces and tabs from a line's start to a block tag or comment
  if (after && after->kind != TagKind::variable && after->left_marker != '+' && after->left_marker != '-') {
    size_t start = text.size();
    while (start > 0 && (text[start - 1] == ' ' || text[start - 1] == '\t')) --start;
    lstrip = start == 0 ? before == nullptr : text[start - 1] == '\n';
  }
  if (before && before->right_marker == '-') {
    size_t n = 0;
    while (n < text.size() && is_space(text[n])) ++n;
    text.erase(0, n);
  } else if (before && before->kind != TagKind::variable && before->right_marker != '+' && !text.empty() &&
             text[0] == '\n') {
    text.erase(0, 1);  // trim_blocks: the newline after a block tag or comment
  }
  if (after && after->left_marker == '-') {
    while (!text.empty() && is_space(text.back())) text.pop_back();
  } else if (lstrip) {
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.pop_back();
  }
  return text;
}

// About 60 bytes of `text` around `at`, cut at character boundaries, newlines shown as \n.
std::string excerpt(const std::string& text, size_t at) {
  auto boundary = [&](size_t i) {
    while (i > 0 && i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    return std::min(i, text.size());
  };
  const size_t begin = boundary(at > 30 ? at - 30 : 0), end = boundary(begin + 60);
  const std::string out =
      (begin > 0 ? "..." : "") + text.substr(begin, end - begin) + (end < text.size() ? "..." : "");
  std::string escaped;
  for (const char c : out) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  return "'" + escaped + "'";
}

}  // namespace

std::string normalise_jinja(std::string_view source) {
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r' && i + 1 < source.size() && source[i + 1] == '\n') continue;
    text += source[i];
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();  // Jinja drops one final newline
  const std::vector<Piece> pieces = lex(text);
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (!p.tag) {
      out += output_of_raw(p.text, i > 0 ? &pieces[i - 1] : nullptr, i + 1 < pieces.size() ? &pieces[i + 1] : nullptr);
    } else if (p.kind == TagKind::variable) {
      out += "{{" + p.text + "}}";
    } else if (p.kind == TagKind::block) {
      out += "{%" + p.text + "%}";
    }  // comments output nothing
  }
  return out;
}

std::vector<KnownJinjaTemplate> known_jinja_templates() {
  std::vector<KnownJinjaTemplate> known;
  std::error_code ec;
  for (const auto& dir : chat_template_search_dirs()) {
    for (const auto& family : fs::directory_iterator(fs::path(dir) / "jinja", ec)) {
      if (!family.is_directory(ec)) continue;
      for (const auto& file : fs::directory_iterator(family.path(), ec)) {
        if (file.path().extension() != ".jinja") continue;
        const std::string name = family.path().filename().string();
        const bool seen = std::any_of(known.begin(), known.end(), [&](const KnownJinjaTemplate& k) {
          return k.template_name == name && fs::path(k.path).filename() == file.path().filename();
        });
        if (!seen) known.push_back({name, file.path().string(), normalise_jinja(read_file(file.path().string()))});
      }
    }
  }
  std::sort(known.begin(), known.end(), [](const KnownJinjaTemplate& a, const KnownJinjaTemplate& b) {
    return std::tie(a.template_name, a.path) < std::tie(b.template_name, b.path);
  });
  return known;
}

std::optional<KnownJinjaTemplate> recognise_chat_template(std::string_view jinja) {
  const std::string normalised = normalise_jinja(jinja);
  for (auto& known : known_jinja_templates()) {
    if (known.normalised == normalised) return known;
  }
  return std::nullopt;
}

std::string default_chat_template_name(const Tokenizer& tokenizer) {
  return tokenizer.hf_config().chat_template ? "auto" : "demo";
}

ChatTemplate resolve_command_line_chat_template(const std::string& flag_value, const Tokenizer& tokenizer) {
  return resolve_chat_template(flag_value.empty() ? default_chat_template_name(tokenizer) : flag_value, tokenizer,
                               "--chat-template");
}

ChatTemplate resolve_chat_template(const std::string& name_or_path, const Tokenizer& tokenizer,
                                   const std::string& setting) {
  if (name_or_path != "auto") return load_chat_template(name_or_path);
  const std::string how = "set " + setting + " to a shipped template (" + join(shipped_chat_template_names(), ", ") +
                          ") or to a .yaml/.json template file (configs/templates/README.md)";
  const HfTokenizerConfig& hf = tokenizer.hf_config();
  if (!hf.chat_template) {
    const std::string folder = fs::path(tokenizer.path()).parent_path().string();
    throw ConfigError(setting + " is auto, but the tokenizer folder '" + (folder.empty() ? "." : folder) +
                      "' has no chat template (no chat_template in tokenizer_config.json, no chat_template.jinja) to "
                      "recognise; " + how);
  }
  const std::string normalised = normalise_jinja(*hf.chat_template);
  const std::vector<KnownJinjaTemplate> known = known_jinja_templates();
  for (const auto& k : known) {
    if (k.normalised == normalised) return load_chat_template(k.template_name);
  }
  // Not recognised: list what is known, and point at the first difference from a near miss (one
  // whose common beginning and end cover at least half of it: an edited string, an added line).
  std::vector<std::string> names;
  const KnownJinjaTemplate* closest = nullptr;
  size_t closest_prefix = 0, closest_common = 0;
  for (const auto& k : known) {
    names.push_back(k.template_name + " (" + fs::path(k.path).stem().string() + ")");
    const std::string& theirs = k.normalised;
    const size_t shorter = std::min(normalised.size(), theirs.size());
    size_t prefix = 0, suffix = 0;
    while (prefix < shorter && normalised[prefix] == theirs[prefix]) ++prefix;
    while (suffix < shorter - prefix &&
           normalised[normalised.size() - 1 - suffix] == theirs[theirs.size() - 1 - suffix]) {
      ++suffix;
    }
    if (prefix + suffix > closest_common) {
      closest_common = prefix + suffix;
      closest_prefix = prefix;
      closest = &k;
    }
  }
  std::string near;
  if (closest && 2 * closest_common >= std::max(normalised.size(), closest->normalised.size())) {
    near = "; the closest is " + closest->template_name + "'s " + closest->path + ", which differs at " +
           excerpt(normalised, closest_prefix) + " (theirs: " + excerpt(closest->normalised, closest_prefix) + ")";
  }
  throw ConfigError(hf.chat_template_source + ": its chat template is not one Ferry recognises (" + setting +
                    " is auto; known: " + (names.empty() ? std::string("none found") : join(names, ", ")) + near +
                    "). A template that differs may render different text, so Ferry does not guess: " + how +
                    ", after checking that it renders the same text; or, if it is a known model's template in another "
                    "revision, add it as configs/templates/jinja/<template>/<model>.jinja");
}

}  // namespace ferry
