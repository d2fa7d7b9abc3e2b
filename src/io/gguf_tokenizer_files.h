// A GGUF file's vocabulary (`tokenizer.ggml.*`, `tokenizer.chat_template`) written as the Hugging
// Face tokenizer files Ferry's Tokenizer reads, so a GGUF model tokenizes as llama.cpp runs it and
// as transformers' GGUF tokenizer (integrations/gguf/gguf_tokenizer_mapping.py) builds it:
//
//   tokenizer.ggml.model "gpt2" -> tokenizer.json, a byte-level BPE:
//     vocab   the tokens by id, each spelled in GPT-2's byte alphabet (a token with characters
//             outside it, e.g. a literal space, is respelled from its UTF-8 bytes, as transformers
//             does, except an added token, which keeps its text); merges as the file lists them
//     pre     tokenizer.ggml.pre, mapped as llama.cpp maps it to its split (see kGgufPreTokenizers):
//             Llama 3's regex (llama-bpe, llama3, llama-v3, falcon3, pixtral, smaug-bpe, dbrx),
//             Qwen2's (qwen2, deepseek-r1-qwen, megrez), individual digits then GPT-2's regex
//             (smollm), GPT-2's regex alone (gpt-2, default); any other name is an InputError
//             listing these
//     added   tokens of type control (3) as special added tokens, user-defined (4) as plain ones
//             (matched whole in text, as llama.cpp does; transformers drops a user-defined token
//             outside the byte alphabet)
//   Where transformers' GGUF tokenizer departs from the tokenizer a vocabulary came from ("smollm"'s
//   single digits, such user-defined tokens), Ferry follows the source, as llama.cpp does. A
//   SentencePiece vocabulary gets tokenizer_config.json's defaults, so text that starts with a space
//   tokenizes as transformers 5 does (llama.cpp adds one more "▁" there). A GGUF carries no normalizer (Qwen2's NFC, SentencePiece's
//   nmt_nfkc), so neither llama.cpp nor Ferry applies one.
//   tokenizer.ggml.model "llama" -> tokenizer.model, a SentencePiece BPE model with the pieces,
//     scores and types of the file (byte pieces <0x..> as byte fallback), add_dummy_prefix from
//     tokenizer.ggml.add_space_prefix (default true), no whitespace folding: what llama.cpp's SPM
//     tokenizer runs
//   tokenizer_config.json: bos / eos / unk / pad token texts from tokenizer.ggml.*_token_id,
//     add_bos_token / add_eos_token (for "llama" add_bos_token defaults to true, as llama.cpp and
//     transformers assume for old files), chat_template from tokenizer.chat_template
#pragma once

#include <filesystem>
#include <string>

#include "src/io/gguf_file.h"

namespace ferry::io {

// The pre-tokenizer names Ferry maps, for messages.
extern const char* const kGgufPreTokenizers;

// Writes the tokenizer file(s) and tokenizer_config.json of `file` into `folder`. Throws
// InputError naming the file and key for a vocabulary Ferry cannot rebuild.
void write_gguf_tokenizer_files(const GgufFile& file, const std::filesystem::path& folder);

}  // namespace ferry::io
