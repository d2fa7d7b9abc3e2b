// The vocabulary part of a GGUF file (`tokenizer.ggml.*`, `tokenizer.chat_template`), read from a
// Hugging Face model folder the way llama.cpp's convert_hf_to_gguf.py reads it, so llama.cpp and
// Ollama tokenize as the model was trained:
//
//   tokenizer.model (SentencePiece; wins when both files exist, as in the converter)
//     -> tokenizer.ggml.model "llama", pre "default": every piece with its score and type
//        (normal 1, unknown 2, control 3, user-defined 4, unused 5, byte 6); ids up to vocab_size
//        that the model lacks are "[PAD<id>]" (unused, score -10000); tokenizer_config.json's
//        added_tokens_decoder and added_tokens.json override pieces as the converter does
//        (control when special or "<|...|>"-like, else user-defined; score -1000);
//        tokenizer.ggml.add_space_prefix = the model's add_dummy_prefix.
//        One deliberate difference: pieces the SentencePiece model itself marks user-defined
//        (chat markers such as "<|end|>") keep type 4, where the converter writes 1 (normal);
//        llama.cpp then matches them whole in text, as SentencePiece does.
//   tokenizer.json (byte-level BPE: a ByteLevel pre-tokenizer step)
//     -> tokenizer.ggml.model "gpt2": the vocab and the added tokens by id (added tokens by their
//        content, control when special or "<|...|>"-like, else user-defined with "▁" -> " "),
//        ids up to vocab_size that neither has are "[PAD<id>]" (unused); merges as "a b" (both
//        JSON forms; a space inside a part of the ["a", "b"] form is written as U+0120, as gguf-py
//        does); tokenizer.ggml.pre recognised from the pre-tokenizer (llama.cpp instead hashes the
//        tokenization of a probe text, which fails for any newly trained tokenizer):
//          Split(Llama 3's regex, Isolated) + ByteLevel(use_regex false)      -> "llama-bpe"
//          Split(Qwen2's regex, Isolated) + ByteLevel(use_regex false)        -> "qwen2"
//          Digits(individual_digits) + ByteLevel(use_regex, no prefix space)  -> "smollm"
//          ByteLevel(use_regex, no prefix space) alone                        -> "gpt-2"
//        anything else is an InputError that names the pre-tokenizer and says to pass --gguf-pre
//        with the llama.cpp pre-tokenizer name that matches it (a wrong guess tokenizes wrongly,
//        so Ferry does not guess).
//
// Special ids (bos, eos, unk, pad), first found wins:
//   1. tokenizer_config.json `<kind>_token` ("text" or {"content": "text"}): the tokenizer.json
//      added token with that content (BPE) or the piece with that text (SentencePiece); a text
//      that names no token is skipped with a warning;
//   2. config.json `<kind>_token_id` (eos: an integer or the first of a list);
//   3. SentencePiece only: the model's own unk/bos/eos/pad ids.
// An id outside [0, vocab_size) is an InputError naming the file and key.
// add_bos_token / add_eos_token: tokenizer_config.json's booleans; else for BPE from a
// TemplateProcessing post-processor (a leading BOS / trailing EOS special token in `single`), else
// false; for SentencePiece true / false (Llama's defaults). Both are always written.
// Chat template: tokenizer_config.json `chat_template` (a string, or the entry named "default" of a
// list), else chat_template.jinja.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "src/io/gguf_writer.h"

namespace ferry::io {

struct GgufVocab {
  std::string model;                 // tokenizer.ggml.model: "llama" or "gpt2"
  std::string pre;                   // tokenizer.ggml.pre
  std::string source;                // the tokenizer file it came from, for messages
  std::vector<std::string> tokens;   // vocab_size entries
  std::vector<float> scores;         // "llama" only
  std::vector<int32_t> token_types;  // llama_token_type values
  std::vector<std::string> merges;   // "gpt2" only
  int64_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;  // -1: none
  bool add_bos = false;
  bool add_eos = false;
  bool has_space_prefix_flag = false;  // "llama": add_space_prefix is written
  bool add_space_prefix = true;
  std::string chat_template;           // empty: none
  std::vector<std::string> warnings;   // things a user should know (printed by the CLI)
};

// The vocabulary of `model_dir` for a model with `vocab_size` embedding rows. `pre_override`
// (--gguf-pre), when not empty, replaces the recognised BPE pre-tokenizer name. Throws InputError
// naming the file and field for a missing tokenizer, a tokenizer that is not SentencePiece or
// byte-level BPE, more tokens than vocab_size, an unrecognised pre-tokenizer, or a malformed field.
GgufVocab read_gguf_vocab(const std::filesystem::path& model_dir, int64_t vocab_size,
                          const std::string& pre_override = "");

// Adds the tokenizer.* keys of `vocab` to `writer`.
void add_gguf_vocab(GgufWriter& writer, const GgufVocab& vocab);

}  // namespace ferry::io
