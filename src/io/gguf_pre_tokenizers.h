// The pre-tokenizer regexes llama.cpp names in `tokenizer.ggml.pre` (tokenizer.json's
// `Split.pattern.Regex`): read back from a tokenizer.json when exporting GGUF, written into one
// when a GGUF file becomes a model folder.
#pragma once

namespace ferry::io {

// Llama 3 (llama-bpe and its aliases): digits in runs of up to three.
inline constexpr const char* kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2 (and its aliases): single digits.
inline constexpr const char* kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace ferry::io
