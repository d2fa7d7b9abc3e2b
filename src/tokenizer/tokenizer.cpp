// Tokenizer: SentencePiece or tokenizer.json BPE behind Ferry's errors and int64 ids.
#include "src/tokenizer/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "core/file_util.h"
#include "core/folder_file.h"
#include "src/tokenizer/bpe_tokenizer.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

bool file_exists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A folder's tokenizer file: tokenizer.model first (a Llama 2 folder holds both, and
// SentencePiece is what the model was trained with), else tokenizer.json.
std::string resolve_model_path(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  const fs::path model = fs::path(path) / "tokenizer.model";
  const fs::path json = fs::path(path) / "tokenizer.json";
  if (!file_exists(model) && file_exists(json)) return checked_folder_file(path, json).string();
  if (file_exists(model)) checked_folder_file(path, model);
  return model.string();
}

// The files beside the tokenizer that a saved model folder needs to load it again as it was: its
// special tokens and chat templates (named ones in additional_chat_templates/, sorted).
std::vector<std::string> side_files(const std::string& folder) {
  const fs::path dir = folder.empty() ? "." : folder;
  std::vector<std::string> out;
  for (const char* side : {"tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                           "chat_template.json"}) {
    if (file_exists(dir / side)) out.push_back((dir / side).string());
  }
  std::vector<std::string> named;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir / "additional_chat_templates", ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".jinja") named.push_back(entry.path().string());
  }
  std::sort(named.begin(), named.end());
  out.insert(out.end(), named.begin(), named.end());
  return out;
}

using ControlPiece = std::pair<std::string, int64_t>;

// Calls on_stretch(begin, end, control) for each stretch of plain text [begin, end) of `text` and
// the control piece written right after it (null after the last stretch). `controls` longest first.
void split_at_control_pieces(std::string_view text, const std::vector<ControlPiece>& controls,
                             const std::function<void(size_t, size_t, const ControlPiece*)>& on_stretch) {
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    const ControlPiece* match = nullptr;
    for (const auto& control : controls) {
      if (text.compare(pos, control.first.size(), control.first) == 0) {
        match = &control;
        break;
      }
    }
    if (!match) {
      ++pos;
      continue;
    }
    on_stretch(start, pos, match);
    pos += match->first.size();
    start = pos;
  }
  on_stretch(start, text.size(), nullptr);
}

}  // namespace

Tokenizer::Tokenizer(const std::string& path) : path_(resolve_model_path(path)) {
  if (!file_exists(path_)) {
    throw InputError("tokenizer file '" + path_ + "' does not exist (set tokenizer.path to a SentencePiece " +
                     "tokenizer.model or a Hugging Face tokenizer.json, e.g. data/tokenizer.model, or a model " +
                     "folder that holds one)");
  }
  const std::string folder = fs::path(path_).parent_path().string();
  // A lone file given as tokenizer.path still finds the tokenizer_config.json beside it.
  hf_config_ = read_hf_tokenizer_config(folder.empty() ? "." : folder);
  if (ends_with(path_, ".json")) {
    load_bpe(folder);
  } else {
    load_sentencepiece();
  }
  // Longest first, so a piece that is a prefix of another ("<s>" vs "<s>x") never wins wrongly.
  std::stable_sort(control_pieces_.begin(), control_pieces_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

void Tokenizer::load_sentencepiece() {
  processor_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  // Read it ourselves so a missing or unreadable file gets Ferry's message, then parse from memory.
  const std::string bytes = read_file(path_);
  sentencepiece::util::Status status;
  try {
    status = processor_->LoadFromSerializedProto(bytes);
  } catch (const std::exception& e) {  // the library's trie builder throws on some bad models
    throw InputError("tokenizer file '" + path_ + "' is not a valid SentencePiece model (" + e.what() + ")");
  }
  if (!status.ok() || processor_->GetPieceSize() <= 0) {
    throw InputError("tokenizer file '" + path_ + "' is not a valid SentencePiece model (" +
                     (status.ok() ? std::string("empty vocabulary") : status.ToString()) +
                     "); a Hugging Face tokenizer.json must be named *.json");
  }
  files_ = {path_};
  for (auto& side : side_files(fs::path(path_).parent_path().string())) files_.push_back(std::move(side));
  // transformers 5's LlamaTokenizer: prepend scheme "always" (legacy), "first" (default) or "never".
  prefix_first_stretch_ = hf_config_.add_prefix_space.value_or(true);
  prefix_every_stretch_ = prefix_first_stretch_ && hf_config_.legacy.value_or(false);
  if (!prefix_every_stretch_) {
    // NormalizerSpec (ModelProto field 3) again with add_dummy_prefix (its field 3) false: protobuf
    // merges a repeated message field, so this one setting changes.
    static constexpr char kNoDummyPrefix[] = {0x1A, 0x02, 0x18, 0x00};
    processor_no_prefix_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto no_prefix = processor_no_prefix_->LoadFromSerializedProto(bytes + std::string(kNoDummyPrefix, 4));
    FERRY_CHECK(no_prefix.ok(), "reloading ", path_, " without its dummy prefix: ", no_prefix.ToString());
  }
  vocab_size_ = processor_->GetPieceSize();
  bos_id_ = processor_->bos_id();
  eos_id_ = processor_->eos_id();
  pad_id_ = processor_->pad_id();
  unk_id_ = processor_->unk_id();
  for (int id = 0; id < vocab_size_; ++id) {
    if (processor_->IsControl(id)) {
      const std::string piece = processor_->IdToPiece(id);
      if (!piece.empty()) control_pieces_.emplace_back(piece, id);
    }
  }
}

void Tokenizer::load_bpe(const std::string& folder) {
  bpe_ = std::make_unique<BpeTokenizer>(path_);
  files_ = {path_};
  for (auto& side : side_files(folder)) files_.push_back(std::move(side));
  vocab_size_ = bpe_->vocab_size();
  control_pieces_ = bpe_->special_tokens();
  const HfTokenizerConfig& hf = hf_config_;
  // tokenizer_config.json names the tokens by text; a token it names must exist.
  const auto named = [&](const std::optional<std::string>& text, const char* key) -> int64_t {
    if (!text) return -1;
    if (auto id = bpe_->find_piece(*text)) return *id;
    throw InputError(hf.source + ": " + key + " '" + *text + "' is not a token of " + path_ +
                     "; fix the file or use the tokenizer it was written for");
  };
  const auto numbered = [&](const std::optional<int64_t>& id) -> int64_t {
    return id && *id >= 0 && *id < vocab_size_ ? *id : -1;
  };
  if (!hf.source.empty()) {
    // The file is the authority: Qwen2.5 sets bos_token to null and so has no BOS, whatever
    // config.json's bos_token_id says.
    bos_id_ = named(hf.bos_token, "bos_token");
    eos_id_ = named(hf.eos_token, "eos_token");
    pad_id_ = named(hf.pad_token, "pad_token");
    unk_id_ = named(hf.unk_token, "unk_token");
  } else {
    bos_id_ = numbered(hf.bos_token_id);
    eos_id_ = numbered(hf.eos_token_id);
    pad_id_ = numbered(hf.pad_token_id);
  }
  if (bos_id_ < 0 && hf.source.empty()) bos_id_ = bpe_->leading_special_id().value_or(-1);
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  if (bpe_) return bpe_->encode(text);
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) {
    throw InputError("tokenizer '" + path_ + "' cannot encode text (" + status.ToString() + ")");
  }
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::vector<TokenSpan> Tokenizer::encode_with_offsets(std::string_view text) const {
  if (bpe_) return bpe_->encode_with_offsets(text);
  return encode_sentencepiece_with_offsets(*processor_, text);
}

std::vector<TokenSpan> Tokenizer::encode_sentencepiece_with_offsets(
    const sentencepiece::SentencePieceProcessor& processor, std::string_view text) const {
  const sentencepiece::ImmutableSentencePieceText encoded = processor.EncodeAsImmutableProto(text);
  std::vector<TokenSpan> out;
  out.reserve(encoded.pieces_size());
  for (size_t i = 0; i < encoded.pieces_size(); ++i) {
    const auto piece = encoded.pieces(static_cast<int>(i));
    out.push_back({static_cast<int64_t>(piece.id()), piece.begin(), piece.end()});
  }
  // EncodeAsImmutableProto reports no status; an encoding that lost text is an error, not silence.
  if (out.empty() && !text.empty() && !encode(text).empty()) {
    throw InputError("tokenizer '" + path_ + "' cannot encode text with offsets");
  }
  return out;
}

std::vector<TokenSpan> Tokenizer::encode_with_control_pieces_and_offsets(std::string_view text) const {
  if (bpe_) return bpe_->encode_with_control_pieces_and_offsets(text);
  std::vector<TokenSpan> out;
  split_at_control_pieces(text, control_pieces_, [&](size_t begin, size_t end, const ControlPiece* control) {
    // A leading space is the "▁" the dummy prefix writes; otherwise the prefix is added as the
    // folder's prepend scheme says (every stretch, or only the text's start).
    const size_t skip = begin < end && text[begin] == ' ' ? 1 : 0;
    const bool prefix = skip || prefix_every_stretch_ || (begin == 0 && prefix_first_stretch_);
    const std::string_view stretch = text.substr(begin + skip, end - begin - skip);
    if (skip && stretch.empty()) {  // a lone space is the "▁" piece itself (transformers' Metaspace)
      const int space = processor_->PieceToId("\u2581");
      if (space != processor_->unk_id()) out.push_back({space, begin, begin + 1});
    }
    for (TokenSpan span : prefix ? encode_with_offsets(stretch)
                                 : encode_sentencepiece_with_offsets(*processor_no_prefix_, stretch)) {
      span.begin += begin + skip;
      span.end += begin + skip;
      if (skip && span.begin == begin + skip) span.begin = begin;  // the dropped space is the dummy prefix's
      out.push_back(span);
    }
    if (control) out.push_back({control->second, end, end + control->first.size()});
  });
  return out;
}

std::vector<int64_t> Tokenizer::encode_with_control_pieces(std::string_view text) const {
  if (bpe_) return bpe_->encode_with_control_pieces(text);
  std::vector<int64_t> out;
  split_at_control_pieces(text, control_pieces_, [&](size_t begin, size_t end, const ControlPiece* control) {
    const auto plain = encode(text.substr(begin, end - begin));
    out.insert(out.end(), plain.begin(), plain.end());
    if (control) out.push_back(control->second);
  });
  return out;
}

std::vector<int64_t> Tokenizer::encode_as_sequence(std::string_view text) const {
  std::optional<int64_t> first;
  if (bpe_) {
    first = bpe_->leading_special_id();
  } else if (bos_id_ >= 0 && hf_config_.add_bos_token.value_or(true)) {
    first = bos_id_;
  }
  std::vector<int64_t> out;
  if (first) out.push_back(*first);
  for (const TokenSpan& span : encode_with_control_pieces_and_offsets(text)) out.push_back(span.id);
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  if (bpe_) {
    for (const int64_t id : ids) check_id(id);
    return bpe_->decode(ids);
  }
  std::vector<int> narrow;
  narrow.reserve(ids.size());
  for (const int64_t id : ids) {
    check_id(id);
    narrow.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = processor_->Decode(narrow, &text);
  if (!status.ok()) {
    throw InputError("tokenizer '" + path_ + "' cannot decode ids (" + status.ToString() + ")");
  }
  return text;
}

std::optional<int64_t> Tokenizer::find_piece(std::string_view piece) const {
  if (bpe_) return bpe_->find_piece(piece);
  const int id = processor_->PieceToId(piece);
  // SentencePiece answers unk_id for unknown pieces; only the unk piece itself really maps there.
  if (id < 0 || id >= vocab_size_) return std::nullopt;
  if (id == unk_id_ && processor_->IdToPiece(id) != piece) return std::nullopt;
  return id;
}

int64_t Tokenizer::piece_to_id(std::string_view piece) const {
  if (auto id = find_piece(piece)) return *id;
  throw InputError("tokenizer '" + path_ + "' has no piece '" + std::string(piece) + "'");
}

std::string Tokenizer::side_file_name(const std::string& file) const {
  const fs::path folder = fs::path(path_).parent_path();
  return fs::path(file).lexically_relative(folder.empty() ? fs::path(".") : folder).string();
}

std::string Tokenizer::id_to_piece(int64_t id) const {
  check_id(id);
  if (bpe_) return bpe_->id_to_piece(id);
  return processor_->IdToPiece(static_cast<int>(id));
}

bool Tokenizer::is_control(int64_t id) const {
  check_id(id);
  if (bpe_) return bpe_->is_special(id);
  return processor_->IsControl(static_cast<int>(id));
}

void Tokenizer::check_id(int64_t id) const {
  if (id < 0 || id >= vocab_size_) {
    throw InputError("token id " + std::to_string(id) + " is outside the vocabulary of tokenizer '" + path_ +
                     "' (size " + std::to_string(vocab_size_) + "); does the model match this tokenizer?");
  }
}

}  // namespace ferry
