// Decoder: checks the tokenizer.json `decoder` is one Ferry reproduces — ByteLevel, alone or in a
// Sequence followed by Fuse (which then only joins strings, as ByteLevel already does) — and
// turns a piece into the bytes it decodes to: ByteLevel characters back to their bytes; a piece
// with a character outside that alphabet (an added token such as "a b") stays as its own UTF-8.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace ferry {

struct JsonField;

// InputError unless `decoder` is ByteLevel, or a Sequence of one ByteLevel and Fuses after it.
void check_byte_level_decoder(const nlohmann::json& decoder, const JsonField& field);

// The bytes ByteLevel's decoder makes of one piece (before the final lossy UTF-8 repair).
std::string byte_level_piece_bytes(std::string_view piece);

}  // namespace ferry
