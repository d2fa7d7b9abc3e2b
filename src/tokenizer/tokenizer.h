// Tokenizer: a model folder's tokenizer behind a small interface with Ferry's errors and int64
// token ids: a SentencePiece `tokenizer.model` (Llama 1/2, Mistral, data/tokenizer.model) or a
// Hugging Face `tokenizer.json` byte-level BPE (Qwen2/2.5/3, Llama 3.x, SmolLM2; see
// bpe_tokenizer.h), whichever the folder holds (tokenizer.model first). For tokenizer.json, BOS,
// EOS and pad come from the folder's tokenizer_config.json (or config.json's ids).
//
// encode() never adds BOS/EOS; callers (chat templates, data loaders, generation) decide where
// they go. Encoding and decoding are const and safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/tokenizer/hf_tokenizer_config.h"
#include "src/tokenizer/token_span.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ferry {

class BpeTokenizer;

enum class TokenizerKind { sentencepiece, byte_level_bpe };

class Tokenizer {
 public:
  // Loads a SentencePiece model file, a tokenizer.json, or the folder `path` (its tokenizer.model,
  // else its tokenizer.json). Throws InputError naming the file when it is missing, unreadable or
  // not a tokenizer Ferry reads.
  explicit Tokenizer(const std::string& path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Token ids of `text`, without BOS or EOS. Text that spells a control piece ("<s>", "</s>", a
  // tokenizer.json's special tokens such as "<|im_end|>") stays text; user-defined pieces (the
  // demo's "<|end|>", a tokenizer.json's non-special added tokens) become their one id.
  std::vector<int64_t> encode(std::string_view text) const;

  // As encode(), except that control pieces written literally in `text` ("<s>", "</s>") become
  // their ids. For chat-template markers only, never for user content (a user who types "</s>"
  // must not end the sequence).
  std::vector<int64_t> encode_with_control_pieces(std::string_view text) const;

  // As encode(), with the input bytes each token came from.
  std::vector<TokenSpan> encode_with_offsets(std::string_view text) const;

  // What transformers' tokenizer(text, add_special_tokens=False) gives, with offsets: control
  // pieces written anywhere in `text` become their ids. For a model's rendered chat template
  // (apply_chat_template tokenises its text so). tokenizer.json: the library's encoding exactly.
  // SentencePiece: each stretch between control pieces is encoded on its own, as transformers 5's
  // LlamaTokenizer (a Metaspace pre-tokenizer) does: a stretch that starts with a space keeps it as
  // its "▁" ("<s> [INST]": "<s>", "▁[INST]"); one that does not gets a "▁" in front with
  // tokenizer_config.json's `legacy: true` ("</s>[INST]": "▁[INST]"), and only at the start of the
  // text with `legacy: false`, transformers' default ("</s>[INST]": "[INST]"); never with
  // `add_prefix_space: false`.
  std::vector<TokenSpan> encode_with_control_pieces_and_offsets(std::string_view text) const;

  // What transformers' tokenizer(text) gives (add_special_tokens=True), as TRL tokenises plain-text
  // rows: the ids of encode_with_control_pieces_and_offsets after the token a single sequence starts
  // with: the tokenizer.json post-processor's (Llama 3's <|begin_of_text|>, Gemma's <bos>; none for
  // Qwen or SmolLM2), or for SentencePiece the BOS unless tokenizer_config.json's add_bos_token is false.
  std::vector<int64_t> encode_as_sequence(std::string_view text) const;

  // Control pieces by text ("<s>", "</s>", ...), longest first: what encode_with_control_pieces
  // recognises.
  const std::vector<std::pair<std::string, int64_t>>& control_pieces() const { return control_pieces_; }

  // Text of `ids`; control ids (BOS, EOS, pad) decode to nothing, byte pieces to their bytes.
  // Throws InputError when an id is outside the vocabulary (a model/tokenizer mismatch).
  std::string decode(const std::vector<int64_t>& ids) const;

  // Special ids; -1 when the model has none (Llama's tokenizer has no pad).
  int64_t bos_id() const { return bos_id_; }
  int64_t eos_id() const { return eos_id_; }
  int64_t pad_id() const { return pad_id_; }
  int64_t unk_id() const { return unk_id_; }
  int64_t vocab_size() const { return vocab_size_; }

  // The id of a piece ("▁the", "<|end|>", "<0x0A>"), or nullopt when it is not in the vocabulary.
  std::optional<int64_t> find_piece(std::string_view piece) const;
  // As find_piece, but throws InputError naming the tokenizer file when the piece is absent.
  int64_t piece_to_id(std::string_view piece) const;
  // The piece of an id; throws InputError when the id is outside the vocabulary.
  std::string id_to_piece(int64_t id) const;

  // True for control pieces (<s>, </s>, <pad>; a tokenizer.json's special tokens), which never
  // come out of encode().
  bool is_control(int64_t id) const;

  // The file the model was loaded from, for error messages.
  const std::string& path() const { return path_; }
  TokenizerKind kind() const { return bpe_ ? TokenizerKind::byte_level_bpe : TokenizerKind::sentencepiece; }
  // The files a saved model folder needs to load this tokenizer again (tokenizer.model or
  // tokenizer.json first, then the folder's tokenizer_config.json, special_tokens_map.json,
  // chat_template.jinja, chat_template.json and additional_chat_templates/*.jinja when present).
  // Side files keep their place relative to the tokenizer's folder (side_file_name).
  const std::vector<std::string>& files() const { return files_; }
  // A side file's name in a saved folder: its path relative to the tokenizer's folder
  // ("tokenizer_config.json", "additional_chat_templates/tool_use.jinja").
  std::string side_file_name(const std::string& file) const;
  // The folder's tokenizer_config.json (chat template, special tokens); empty fields when the
  // tokenizer was loaded from a lone file.
  const HfTokenizerConfig& hf_config() const { return hf_config_; }

 private:
  void load_sentencepiece();
  void load_bpe(const std::string& folder);
  void check_id(int64_t id) const;
  std::vector<TokenSpan> encode_sentencepiece_with_offsets(const sentencepiece::SentencePieceProcessor& processor,
                                                           std::string_view text) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  // The same model without its dummy prefix, for stretches transformers gives no "▁" (`legacy:
  // false` after a control piece); null when the folder's settings never need it.
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_no_prefix_;
  bool prefix_every_stretch_ = true, prefix_first_stretch_ = true;  // from legacy / add_prefix_space
  std::unique_ptr<BpeTokenizer> bpe_;
  std::vector<std::string> files_;
  HfTokenizerConfig hf_config_;
  std::string path_;
  int64_t bos_id_ = -1, eos_id_ = -1, pad_id_ = -1, unk_id_ = -1, vocab_size_ = 0;
  // Control pieces by text, longest first, for encode_with_control_pieces.
  std::vector<std::pair<std::string, int64_t>> control_pieces_;
};

}  // namespace ferry
