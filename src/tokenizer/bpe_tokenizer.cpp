// BpeTokenizer: tokenizer.json loading, the encode pipeline and decoding.
#include "src/tokenizer/bpe_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <unordered_set>

#include "core/error.h"
#include "core/file_util.h"
#include "src/tokenizer/decoder.h"
#include "src/tokenizer/tokenizer_json.h"
#include "src/tokenizer/utf8.h"

namespace ferry {
namespace {

std::string resolve_json_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return (std::filesystem::path(path) / "tokenizer.json").string();
  return path;
}

const nlohmann::json& member(const nlohmann::json& root, const char* key) {
  static const nlohmann::json null_value;
  const auto it = root.find(key);
  return it == root.end() ? null_value : *it;
}

// Characters at the start / end of a token's text that ByteLevel's trim_offsets counts as
// spaces: "Ġ" (a space byte) or any White_Space character.
bool trim_space(char32_t c) { return c == 0x120 || utf8::is_white_space(c); }

uint32_t leading_spaces(std::string_view text) {
  uint32_t count = 0;
  for (size_t pos = 0, length = 0; pos < text.size(); pos += length, ++count) {
    if (!trim_space(utf8::decode(text, pos, &length))) break;
  }
  return count;
}

uint32_t trailing_spaces(std::string_view text) {
  uint32_t count = 0;
  for (size_t end = text.size(), length = 0; end > 0; end -= length, ++count) {
    if (!trim_space(utf8::decode_before(text, end, &length))) break;
  }
  return count;
}

}  // namespace

// Where encode results go: ids, or spans (with what trim_offsets needs).
struct BpeTokenizer::Output {
  std::vector<int64_t>* ids = nullptr;
  std::vector<TokenSpan>* spans = nullptr;
  bool trim = false;
  std::vector<uint32_t> leading, trailing;

  void add(int64_t id, size_t begin, size_t end, uint32_t lead, uint32_t trail) {
    if (ids) ids->push_back(id);
    if (spans) {
      spans->push_back({id, begin, end});
      if (trim) {
        leading.push_back(lead);
        trailing.push_back(trail);
      }
    }
  }
};

BpeTokenizer::BpeTokenizer(const std::string& path) : path_(resolve_json_path(path)) {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) {
    throw InputError("tokenizer file '" + path_ + "' does not exist (give a Hugging Face tokenizer.json, or a " +
                     "model folder that holds one)");
  }
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(read_file(path_));
  } catch (const nlohmann::json::exception& e) {
    throw InputError("tokenizer file '" + path_ + "' is not valid JSON (" + e.what() + ")");
  }
  if (!root.is_object()) throw InputError("tokenizer file '" + path_ + "' is not a tokenizer.json (not a JSON object)");
  const JsonField top{path_, ""};
  if (!root.contains("model")) top.at("model").fail("is missing: a tokenizer.json names its model");

  normalizer_ = Normalizer::from_json(member(root, "normalizer"), top.at("normalizer"));
  pre_tokenizer_ = PreTokenizer::from_json(member(root, "pre_tokenizer"), top.at("pre_tokenizer"));
  model_ = BpeModel::from_json(root["model"], top.at("model"));
  post_processor_ = PostProcessor::from_json(member(root, "post_processor"), top.at("post_processor"));
  check_byte_level_decoder(member(root, "decoder"), top.at("decoder"));
  // `truncation` and `padding` are batch policies, not tokenization: Ferry's callers decide lengths.
  load_added_tokens(member(root, "added_tokens"), top.at("added_tokens"));

  // Per id: the text the library uses for it (an added token's content, else the model piece).
  vocab_size_ = model_.max_id() + 1;
  for (const AddedToken& token : added_) vocab_size_ = std::max(vocab_size_, token.id + 1);
  std::unordered_set<std::string> special_contents;
  for (const auto& [content, id] : special_tokens_) special_contents.insert(content);
  decoded_.resize(static_cast<size_t>(vocab_size_));
  special_ids_.assign(static_cast<size_t>(vocab_size_), false);
  leading_spaces_.assign(static_cast<size_t>(vocab_size_), 0);
  trailing_spaces_.assign(static_cast<size_t>(vocab_size_), 0);
  for (int64_t id = 0; id < vocab_size_; ++id) {
    // A normalized added token goes by its normalized form here (as the library's id_to_token).
    const auto added = added_by_id_.find(id);
    std::string added_text;
    if (added != added_by_id_.end()) added_text = added_piece(added_[added->second]);
    const std::string* text = added != added_by_id_.end() ? &added_text : model_.piece(id);
    if (!text) continue;
    const auto i = static_cast<size_t>(id);
    decoded_[i] = byte_level_piece_bytes(*text);
    special_ids_[i] = special_contents.count(*text) > 0;
    // A model token's offsets trim by its model piece (what the library's Token carries).
    const std::string* piece = model_.piece(id) ? model_.piece(id) : text;
    leading_spaces_[i] = leading_spaces(*piece);
    trailing_spaces_[i] = trailing_spaces(*piece);
  }
}

BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

void BpeTokenizer::load_added_tokens(const nlohmann::json& added_tokens, const JsonField& field) {
  if (added_tokens.is_null()) return;
  if (!added_tokens.is_array()) field.fail("must be a list");
  // Ids as the Rust library assigns them when it loads the file (AddedVocabulary::add_tokens), not
  // the file's `id`: a content the vocabulary has keeps that id, a new one comes after the
  // vocabulary and the added tokens so far. (They agree in a consistent file; where they do not,
  // the library only warns and uses its own, and so does Ferry, so ids stay Python's.)
  std::vector<size_t> specials, plain;  // indices into added_, in the library's pattern order
  std::unordered_set<std::string> special_contents;
  int64_t max_added = -1;  // largest id given to an added token so far
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const nlohmann::json& j = added_tokens[i];
    const JsonField at = field.at(i);
    if (!j.is_object()) at.fail("must be an object");
    // Every field is required, as the library requires them.
    for (const char* key : {"content", "id", "special", "single_word", "lstrip", "rstrip", "normalized"}) {
      if (!j.contains(key)) at.at(key).fail("is missing");
    }
    if (!j["content"].is_string()) at.at("content").fail("must be a string");
    if (!j["id"].is_number_integer()) at.at("id").fail("must be an integer");
    AddedToken token;
    token.content = j["content"].get<std::string>();
    token.special = json_bool(j, "special", false, at);
    token.single_word = json_bool(j, "single_word", false, at);
    token.lstrip = json_bool(j, "lstrip", false, at);
    token.rstrip = json_bool(j, "rstrip", false, at);
    token.normalized = json_bool(j, "normalized", true, at);
    if (token.content.empty()) continue;
    if (token.special && special_contents.insert(token.content).second) {
      special_tokens_.emplace_back(token.content, -1);  // its id is known below
    }
    int64_t id;
    if (const auto known = added_ids_.find(token.content); known != added_ids_.end()) {
      const AddedToken& holder = added_[added_by_id_.at(known->second)];
      if (holder.special == token.special && holder.single_word == token.single_word &&
          holder.lstrip == token.lstrip && holder.rstrip == token.rstrip && holder.normalized == token.normalized) {
        continue;  // the same token again
      }
      id = known->second;
    } else if (const auto piece = model_.find(token.content)) {
      id = *piece;
    } else {
      const auto vocab = static_cast<int64_t>(model_.size());
      id = max_added < 0 ? vocab : (max_added >= vocab || vocab == 0 ? max_added + 1 : vocab);
    }
    max_added = std::max(max_added, id);
    token.id = id;
    added_ids_[token.content] = id;
    added_.push_back(token);
    added_by_id_[id] = added_.size() - 1;  // a later token with the same id replaces the earlier one
    (special_contents.count(token.content) ? specials : plain).push_back(added_.size() - 1);
  }
  special_tokens_.erase(std::remove_if(special_tokens_.begin(), special_tokens_.end(),
                                       [&](const auto& s) { return !added_ids_.count(s.first); }),
                        special_tokens_.end());
  for (auto& [content, id] : special_tokens_) id = added_ids_.at(content);
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });

  // Matchers: specials then the others, split by `normalized`; a match takes its options from
  // the token that now holds the id.
  std::vector<const AddedToken*> raw_tokens, normalized_tokens;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const auto* list : {&specials, &plain}) {
    for (const size_t index : *list) {
      const AddedToken& entry = added_[index];
      const AddedToken* holder = &added_[added_by_id_.at(entry.id)];
      if (entry.normalized) {
        normalized_tokens.push_back(holder);
        normalized_patterns.push_back(normalizer_.apply(entry.content));
      } else {
        raw_tokens.push_back(holder);
        raw_patterns.push_back(entry.content);
      }
    }
  }
  raw_matcher_ = AddedTokenMatcher(std::move(raw_tokens), std::move(raw_patterns));
  normalized_matcher_ = AddedTokenMatcher(std::move(normalized_tokens), std::move(normalized_patterns));
}

void BpeTokenizer::emit_added(const AddedToken& token, std::string_view value, size_t begin, size_t end,
                              Output& out) const {
  out.add(token.id, begin, end, out.trim ? leading_spaces(value) : 0, out.trim ? trailing_spaces(value) : 0);
}

void BpeTokenizer::run(std::string_view text, bool match_special, Output& out) const {
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos) {
    throw InputError("tokenizer '" + path_ + "' cannot encode text that is not valid UTF-8 (byte " +
                     std::to_string(bad) + " of " + std::to_string(text.size()) + ")");
  }
  if (raw_matcher_.empty()) {
    if (!text.empty()) encode_piece(text, 0, match_special, out);
    return;
  }
  std::vector<AddedTokenSplit> splits;
  raw_matcher_.split(text, match_special, splits);
  for (const AddedTokenSplit& split : splits) {
    const std::string_view piece = text.substr(split.begin, split.end - split.begin);
    if (split.token) {
      emit_added(*split.token, piece, split.begin, split.end, out);
    } else {
      encode_piece(piece, split.begin, match_special, out);
    }
  }
}

void BpeTokenizer::encode_piece(std::string_view text, size_t shift, bool match_special, Output& out) const {
  // Normalize; `view` is the normalized text, `align` null when it is `text` itself.
  std::string normalized;
  std::vector<ByteRange> alignment;
  const bool changed = normalizer_.apply(text, shift, normalized, alignment);
  const std::string_view view = changed ? std::string_view(normalized) : text;
  const ByteRange* align = changed ? alignment.data() : nullptr;

  // Original bytes of normalized bytes [first, last]: the characters they belong to.
  const auto original = [&](size_t first, size_t last) -> std::pair<size_t, size_t> {
    if (!align) {
      while (first > 0 && utf8::is_continuation(static_cast<unsigned char>(view[first]))) --first;
      while (last > 0 && utf8::is_continuation(static_cast<unsigned char>(view[last]))) --last;
      return {shift + first, shift + last + utf8::char_length(static_cast<unsigned char>(view[last]))};
    }
    size_t begin = align[first].begin, end = align[first].end;
    for (size_t k = first + 1; k <= last; ++k) {
      begin = std::min(begin, align[k].begin);
      end = std::max(end, align[k].end);
    }
    return {begin, end};
  };

  std::vector<AddedTokenSplit> splits;
  if (normalized_matcher_.empty()) {
    splits.push_back({0, view.size(), nullptr});
  } else {
    normalized_matcher_.split(view, match_special, splits);
  }
  std::vector<PreToken> words;
  std::vector<BpeToken> tokens;
  std::string prefixed;
  for (const AddedTokenSplit& split : splits) {
    if (split.token) {
      const auto [begin, end] = original(split.begin, split.end - 1);
      emit_added(*split.token, view.substr(split.begin, split.end - split.begin), begin, end, out);
      continue;
    }
    words.clear();
    pre_tokenizer_.split(view.substr(split.begin, split.end - split.begin), words);
    for (const PreToken& word : words) {
      const size_t start = split.begin + word.begin;  // in `view`
      std::string_view bytes = view.substr(start, word.end - word.begin);
      if (word.prefix_space) {
        prefixed.assign(1, ' ');
        prefixed.append(bytes);
        bytes = prefixed;
      }
      tokens.clear();
      model_.tokenize(bytes, tokens);
      for (const BpeToken& token : tokens) {
        if (!out.spans) {
          out.ids->push_back(token.id);
          continue;
        }
        // Word bytes -> normalized bytes; a prefix space stands where the word's first character is.
        const size_t skip = word.prefix_space ? 1 : 0;
        const size_t first = start + (token.begin > skip ? token.begin - skip : 0);
        const size_t last = start + (token.end - 1 > skip ? token.end - 1 - skip : 0);
        const auto [begin, end] = original(first, last);
        const auto id = static_cast<size_t>(token.id);
        out.add(token.id, begin, end, leading_spaces_[id], trailing_spaces_[id]);
      }
    }
  }
}

std::vector<int64_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  Output out;
  out.ids = &ids;
  run(text, false, out);
  return ids;
}

std::vector<int64_t> BpeTokenizer::encode_with_control_pieces(std::string_view text) const {
  std::vector<int64_t> ids;
  Output out;
  out.ids = &ids;
  run(text, true, out);
  return ids;
}

std::vector<TokenSpan> BpeTokenizer::encode_with_offsets(std::string_view text) const {
  std::vector<TokenSpan> spans;
  Output out;
  out.spans = &spans;
  out.trim = post_processor_.trims_offsets();
  run(text, false, out);
  if (out.trim) post_processor_.trim_offsets(text, spans, out.leading, out.trailing);
  return spans;
}

std::vector<TokenSpan> BpeTokenizer::encode_with_control_pieces_and_offsets(std::string_view text) const {
  std::vector<TokenSpan> spans;
  Output out;
  out.spans = &spans;
  out.trim = post_processor_.trims_offsets();
  run(text, true, out);
  if (out.trim) post_processor_.trim_offsets(text, spans, out.leading, out.trailing);
  return spans;
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (const int64_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      throw InputError("token id " + std::to_string(id) + " is outside the vocabulary of tokenizer '" + path_ +
                       "' (size " + std::to_string(vocab_size_) + "); does the model match this tokenizer?");
    }
    const auto i = static_cast<size_t>(id);
    if (!special_ids_[i]) bytes += decoded_[i];  // ids no piece has decode to nothing, as in the library
  }
  return utf8::lossy(bytes);
}

std::optional<int64_t> BpeTokenizer::find_piece(std::string_view piece) const {
  if (const auto it = added_ids_.find(std::string(piece)); it != added_ids_.end()) return it->second;
  return model_.find(piece);
}

int64_t BpeTokenizer::piece_to_id(std::string_view piece) const {
  if (auto id = find_piece(piece)) return *id;
  throw InputError("tokenizer '" + path_ + "' has no piece '" + std::string(piece) + "'");
}

std::string BpeTokenizer::added_piece(const AddedToken& token) const {
  return token.normalized ? normalizer_.apply(token.content) : token.content;
}

std::string BpeTokenizer::id_to_piece(int64_t id) const {
  if (const auto it = added_by_id_.find(id); it != added_by_id_.end()) return added_piece(added_[it->second]);
  if (const std::string* piece = model_.piece(id)) return *piece;
  throw InputError("token id " + std::to_string(id) + " has no piece in tokenizer '" + path_ + "' (vocabulary size " +
                   std::to_string(vocab_size_) + ")");
}

bool BpeTokenizer::is_special(int64_t id) const {
  return id >= 0 && id < vocab_size_ && special_ids_[static_cast<size_t>(id)];
}

}  // namespace ferry
