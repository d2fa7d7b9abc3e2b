// BpeTokenizer: a Hugging Face `tokenizer.json` byte-level BPE tokenizer (Qwen2 / Qwen2.5 / Qwen3,
// Llama 3.x, SmolLM2, GPT-2 style) giving the ids, offsets and decoded text of the Python
// `tokenizers` library (tests/parity/tokenizer_bpe_parity_test.cpp checks them).
//
// The pipeline is the library's: added tokens are cut out first (in the original text, then,
// for `normalized` ones, in the normalized text), the rest is normalized (NFC), pre-tokenized
// (Split regexes, ByteLevel) and each word encoded by the BPE model. Anything in the file Ferry
// would not reproduce exactly (another model, normalizer, pre-tokenizer, decoder or
// post-processor type, BPE dropout, subword prefixes) is an InputError naming the file and field,
// never a silently different encoding.
//
// Like Tokenizer (SentencePiece), encode() never adds BOS/EOS and treats special tokens typed in
// the text as text. Encoding and decoding are const and safe to call from several threads.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/tokenizer/added_tokens.h"
#include "src/tokenizer/bpe_model.h"
#include "src/tokenizer/normalizer.h"
#include "src/tokenizer/post_processor.h"
#include "src/tokenizer/pre_tokenizer.h"
#include "src/tokenizer/token_span.h"

namespace ferry {

struct JsonField;

class BpeTokenizer {
 public:
  // Loads `path`, a tokenizer.json or a folder holding one. InputError naming the file when it is
  // missing, not JSON, or uses something Ferry does not support.
  explicit BpeTokenizer(const std::string& path);
  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // Token ids of `text` (UTF-8; InputError otherwise), without BOS or EOS. Added tokens that are
  // not special (Qwen2.5's <tool_call>) become their id; special ones ("<|im_end|>") written in
  // the text stay text, so a user cannot end a turn by typing one. Python: encode() after
  // `tokenizer.encode_special_tokens = True`, add_special_tokens=False.
  std::vector<int64_t> encode(std::string_view text) const;

  // As encode(), except that special tokens written in `text` become their ids, as the Python
  // library does by default. For chat-template markers only, never for user content.
  std::vector<int64_t> encode_with_control_pieces(std::string_view text) const;

  // As encode() / encode_with_control_pieces(), with the input bytes each token stands for (the
  // library's offsets, in bytes: pieces of one character share its span; ByteLevel
  // trim_offsets moves spans off surrounding spaces).
  std::vector<TokenSpan> encode_with_offsets(std::string_view text) const;
  std::vector<TokenSpan> encode_with_control_pieces_and_offsets(std::string_view text) const;

  // Text of `ids`, special tokens skipped (skip_special_tokens=True), bytes that do not form
  // UTF-8 replaced by U+FFFD. InputError for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int64_t>& ids) const;

  // The id of a piece as the file spells it ("Ġthe", "<|im_end|>"), or nullopt.
  std::optional<int64_t> find_piece(std::string_view piece) const;
  // As find_piece, but InputError naming the file when the piece is absent.
  int64_t piece_to_id(std::string_view piece) const;
  // The piece of an id (a normalized added token's normalized form, as the library's
  // id_to_token); InputError when no piece has it.
  std::string id_to_piece(int64_t id) const;

  // Largest id of the vocabulary and the added tokens, plus one.
  int64_t vocab_size() const { return vocab_size_; }
  // True for special added tokens (skipped by decode).
  bool is_special(int64_t id) const;
  // Special added tokens (content, id), longest content first: what encode_with_control_pieces
  // recognises.
  const std::vector<std::pair<std::string, int64_t>>& special_tokens() const { return special_tokens_; }
  // The special token the file's TemplateProcessing puts before a single sequence (Llama 3's
  // <|begin_of_text|>), if any. Ferry's encode does not add it.
  std::optional<int64_t> leading_special_id() const { return post_processor_.leading_special_id(); }

  const std::string& path() const { return path_; }

 private:
  struct Output;
  void run(std::string_view text, bool match_special, Output& out) const;
  void encode_piece(std::string_view text, size_t shift, bool match_special, Output& out) const;
  void load_added_tokens(const nlohmann::json& added_tokens, const JsonField& field);
  std::string added_piece(const AddedToken& token) const;
  void emit_added(const AddedToken& token, std::string_view value, size_t begin, size_t end, Output& out) const;

  std::string path_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  PostProcessor post_processor_;

  std::vector<AddedToken> added_;                    // by first appearance
  std::unordered_map<int64_t, size_t> added_by_id_;  // id -> index in added_
  std::unordered_map<std::string, int64_t> added_ids_;
  AddedTokenMatcher raw_matcher_;         // added tokens with normalized: false
  AddedTokenMatcher normalized_matcher_;  // added tokens with normalized: true
  std::vector<std::pair<std::string, int64_t>> special_tokens_;
  std::vector<bool> special_ids_;          // by id
  std::vector<std::string> decoded_;       // by id: the bytes the decoder makes of the piece
  std::vector<uint32_t> leading_spaces_;   // by id: for ByteLevel trim_offsets
  std::vector<uint32_t> trailing_spaces_;
  int64_t vocab_size_ = 0;
};

}  // namespace ferry
