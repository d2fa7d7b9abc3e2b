// Tokenizer: SentencePiece behind Ferry's errors and int64 ids.
#include "src/tokenizer/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>

#include "src/core/error.h"
#include "src/core/file_util.h"

namespace ferry {
namespace {

std::string resolve_model_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return (std::filesystem::path(path) / "tokenizer.model").string();
  }
  return path;
}

}  // namespace

Tokenizer::Tokenizer(const std::string& path)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()), path_(resolve_model_path(path)) {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) {
    throw InputError("tokenizer file '" + path_ + "' does not exist (set tokenizer.path to a SentencePiece " +
                     "tokenizer.model, e.g. data/tokenizer.model, or a model folder that holds one)");
  }
  // Read it ourselves so a missing or unreadable file gets Ferry's message, then parse from memory.
  const std::string bytes = read_file(path_);
  const auto status = processor_->LoadFromSerializedProto(bytes);
  if (!status.ok() || processor_->GetPieceSize() <= 0) {
    throw InputError("tokenizer file '" + path_ + "' is not a valid SentencePiece model (" +
                     (status.ok() ? std::string("empty vocabulary") : status.ToString()) +
                     "); Ferry reads SentencePiece tokenizer.model files, not Hugging Face tokenizer.json");
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
  // Longest first, so a piece that is a prefix of another ("<s>" vs "<s>x") never wins wrongly.
  std::stable_sort(control_pieces_.begin(), control_pieces_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) {
    throw InputError("tokenizer '" + path_ + "' cannot encode text (" + status.ToString() + ")");
  }
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::vector<TokenSpan> Tokenizer::encode_with_offsets(std::string_view text) const {
  const sentencepiece::ImmutableSentencePieceText encoded = processor_->EncodeAsImmutableProto(text);
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

std::vector<int64_t> Tokenizer::encode_with_control_pieces(std::string_view text) const {
  std::vector<int64_t> out;
  size_t start = 0;  // start of the plain text not yet encoded
  size_t pos = 0;
  while (pos < text.size()) {
    const std::pair<std::string, int64_t>* match = nullptr;
    for (const auto& control : control_pieces_) {
      if (text.compare(pos, control.first.size(), control.first) == 0) {
        match = &control;
        break;
      }
    }
    if (!match) {
      ++pos;
      continue;
    }
    const auto plain = encode(text.substr(start, pos - start));
    out.insert(out.end(), plain.begin(), plain.end());
    out.push_back(match->second);
    pos += match->first.size();
    start = pos;
  }
  const auto plain = encode(text.substr(start));
  out.insert(out.end(), plain.begin(), plain.end());
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
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

std::string Tokenizer::id_to_piece(int64_t id) const {
  check_id(id);
  return processor_->IdToPiece(static_cast<int>(id));
}

bool Tokenizer::is_control(int64_t id) const {
  check_id(id);
  return processor_->IsControl(static_cast<int>(id));
}

void Tokenizer::check_id(int64_t id) const {
  if (id < 0 || id >= vocab_size_) {
    throw InputError("token id " + std::to_string(id) + " is outside the vocabulary of tokenizer '" + path_ +
                     "' (size " + std::to_string(vocab_size_) + "); does the model match this tokenizer?");
  }
}

}  // namespace ferry
