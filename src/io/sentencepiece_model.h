// A SentencePiece `tokenizer.model` read and written as data (pieces, scores, types and the few
// settings a GGUF vocabulary needs), without the sentencepiece library: the file is a protobuf
// ModelProto, and this reads only the fields below, skipping the rest.
//
//   ModelProto      1: repeated SentencePiece { 1: piece (string), 2: score (float), 3: type (enum, default NORMAL) }
//                   2: TrainerSpec { 3: model_type (UNIGRAM 1, BPE 2, WORD 3, CHAR 4), 40: unk_id (0),
//                                    41: bos_id (1), 42: eos_id (2), 43: pad_id (-1),
//                                    35: byte_fallback (false) }
//                   3: NormalizerSpec { 3: add_dummy_prefix (true), 4: remove_extra_whitespaces (true) }
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::io {

// SentencePiece's piece types; the values are also llama.cpp's token types (llama_token_type).
enum class PieceType : int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

struct SentencePiece {
  std::string piece;
  float score = 0.0f;
  PieceType type = PieceType::normal;
};

struct SentencePieceModel {
  std::vector<SentencePiece> pieces;  // by id
  int32_t model_type = 1;             // 1 unigram, 2 BPE, 3 word, 4 char
  int32_t unk_id = 0;                 // -1: none
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t pad_id = -1;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool byte_fallback = false;
};

// Throws InputError naming `source` when the bytes are not a SentencePiece model (bad protobuf
// framing, no pieces, an unknown piece type).
SentencePieceModel parse_sentencepiece_model(std::string_view bytes, const std::string& source);
SentencePieceModel read_sentencepiece_model(const std::filesystem::path& file);

// The ModelProto bytes of `model` (normalizer "identity": no Unicode normalization; whitespace
// escaped to "▁"; the special ids' pieces named in the trainer spec, as the library looks them up
// by text), which the sentencepiece library loads.
std::string format_sentencepiece_model(const SentencePieceModel& model);

}  // namespace ferry::io
