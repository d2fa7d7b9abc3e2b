// ByteLevel: GPT-2's reversible map from the 256 byte values to printable Unicode characters.
// Byte-level BPE vocabularies spell every token in these characters ("Ġthe" is the bytes " the":
// printable ASCII and Latin-1 bytes stand for themselves, the others for U+0100 upwards), so
// tokens can hold any bytes, including parts of one UTF-8 character.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ferry::byte_level {

// UTF-8 of the character that stands for `byte`.
std::string_view char_of(unsigned char byte);

// The bytes a vocabulary piece stands for, or nullopt when one of its characters is outside the
// 256-character alphabet (an added token such as "<|im_end|>" is all inside it; "a b" is not).
std::optional<std::string> decode(std::string_view piece);

// The vocabulary spelling of `bytes`.
std::string encode(std::string_view bytes);

}  // namespace ferry::byte_level
