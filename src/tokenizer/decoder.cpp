// Decoder: ByteLevel decoding of pieces.
#include "src/tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "src/tokenizer/byte_level.h"
#include "src/tokenizer/tokenizer_json.h"

namespace ferry {

void check_byte_level_decoder(const nlohmann::json& decoder, const JsonField& field) {
  if (decoder.is_null()) {
    field.fail("is null; Ferry decodes byte-level BPE with a ByteLevel decoder (without one the library joins "
               "pieces with spaces)");
  }
  const std::string type = json_type(decoder, field);
  if (type == "ByteLevel") return;
  if (type != "Sequence") field.at("type").unsupported(type, {"ByteLevel", "Sequence"});
  const auto it = decoder.find("decoders");
  if (it == decoder.end() || !it->is_array()) field.at("decoders").fail("must be a list of decoders");
  bool byte_level = false;
  for (size_t i = 0; i < it->size(); ++i) {
    const JsonField step = field.at("decoders").at(i);
    const std::string step_type = json_type((*it)[i], step);
    if (step_type == "ByteLevel") {
      if (byte_level) step.fail("is a second ByteLevel decoder");
      byte_level = true;
    } else if (step_type == "Fuse") {
      // After ByteLevel, Fuse only joins strings; before it, it would change what falls back to UTF-8.
      if (!byte_level) step.fail("is a Fuse decoder before the ByteLevel one (supported: after it)");
    } else {
      step.at("type").unsupported(step_type, {"ByteLevel", "Fuse"});
    }
  }
  if (!byte_level) field.at("decoders").fail("has no ByteLevel decoder");
}

std::string byte_level_piece_bytes(std::string_view piece) {
  if (auto bytes = byte_level::decode(piece)) return std::move(*bytes);
  return std::string(piece);
}

}  // namespace ferry
