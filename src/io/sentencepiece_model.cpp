// A minimal protobuf reader for SentencePiece's ModelProto (see sentencepiece_model.h).
#include "src/io/sentencepiece_model.h"

#include <cstring>

#include "core/error.h"
#include "core/file_util.h"
#include "core/protobuf_encoder.h"

namespace ferry::io {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Protobuf wire-format fields of one message, in order.
class ProtoReader {
 public:
  ProtoReader(std::string_view bytes, const std::string& source) : bytes_(bytes), source_(source) {}

  bool done() const { return pos_ >= bytes_.size(); }

  // The next field's number and wire type.
  void next(uint32_t& field, uint32_t& wire) {
    const uint64_t key = varint();
    field = static_cast<uint32_t>(key >> 3);
    wire = static_cast<uint32_t>(key & 7);
    if (field == 0) fail("a field number 0");
  }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) fail("a truncated varint");
      const auto byte = static_cast<uint8_t>(bytes_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail("a varint longer than 10 bytes");
  }

  std::string_view bytes() {
    const uint64_t size = varint();
    if (size > bytes_.size() - pos_) fail("a field longer than the file (truncated?)");
    const std::string_view out = bytes_.substr(pos_, size);
    pos_ += size;
    return out;
  }

  float fixed32_float() {
    if (bytes_.size() - pos_ < 4) fail("a truncated float");
    float value;
    std::memcpy(&value, bytes_.data() + pos_, 4);
    pos_ += 4;
    return value;
  }

  int32_t int32() { return static_cast<int32_t>(static_cast<int64_t>(varint())); }

  void skip(uint32_t wire) {
    size_t size = 0;
    switch (wire) {
      case kVarint: varint(); return;
      case kLengthDelimited: bytes(); return;
      case kFixed64: size = 8; break;
      case kFixed32: size = 4; break;
      default: fail("wire type " + std::to_string(wire) + " (groups are not used by SentencePiece)");
    }
    if (bytes_.size() - pos_ < size) fail("a truncated field");
    pos_ += size;
  }

  void expect(uint32_t wire, uint32_t wanted, const char* what) {
    if (wire != wanted) fail(std::string("field ") + what + " with wire type " + std::to_string(wire));
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(source_ + ": not a SentencePiece model file (protobuf ModelProto): " + what + " at byte " +
                     std::to_string(pos_));
  }

 private:
  std::string_view bytes_;
  const std::string& source_;
  size_t pos_ = 0;
};

SentencePiece read_piece(std::string_view bytes, const std::string& source) {
  ProtoReader in(bytes, source);
  SentencePiece piece;
  while (!in.done()) {
    uint32_t field, wire;
    in.next(field, wire);
    if (field == 1) {
      in.expect(wire, kLengthDelimited, "piece");
      piece.piece = std::string(in.bytes());
    } else if (field == 2) {
      in.expect(wire, kFixed32, "score");
      piece.score = in.fixed32_float();
    } else if (field == 3) {
      in.expect(wire, kVarint, "type");
      const int32_t type = in.int32();
      if (type < 1 || type > 6) in.fail("piece type " + std::to_string(type) + " (known: 1 to 6)");
      piece.type = static_cast<PieceType>(type);
    } else {
      in.skip(wire);
    }
  }
  return piece;
}

void read_trainer_spec(std::string_view bytes, const std::string& source, SentencePieceModel& model) {
  ProtoReader in(bytes, source);
  while (!in.done()) {
    uint32_t field, wire;
    in.next(field, wire);
    int32_t* target = nullptr;
    if (field == 3) target = &model.model_type;
    if (field == 40) target = &model.unk_id;
    if (field == 41) target = &model.bos_id;
    if (field == 42) target = &model.eos_id;
    if (field == 43) target = &model.pad_id;
    if (field == 35) {
      in.expect(wire, kVarint, "trainer_spec byte_fallback");
      model.byte_fallback = in.varint() != 0;
      continue;
    }
    if (target == nullptr) {
      in.skip(wire);
      continue;
    }
    in.expect(wire, kVarint, "trainer_spec id");
    *target = in.int32();
  }
}

void read_normalizer_spec(std::string_view bytes, const std::string& source, SentencePieceModel& model) {
  ProtoReader in(bytes, source);
  while (!in.done()) {
    uint32_t field, wire;
    in.next(field, wire);
    if (field == 3 || field == 4) {
      in.expect(wire, kVarint, "normalizer_spec flag");
      (field == 3 ? model.add_dummy_prefix : model.remove_extra_whitespaces) = in.varint() != 0;
    } else {
      in.skip(wire);
    }
  }
}

}  // namespace

SentencePieceModel parse_sentencepiece_model(std::string_view bytes, const std::string& source) {
  SentencePieceModel model;
  ProtoReader in(bytes, source);
  while (!in.done()) {
    uint32_t field, wire;
    in.next(field, wire);
    if (field >= 1 && field <= 3) {
      in.expect(wire, kLengthDelimited, field == 1 ? "pieces" : field == 2 ? "trainer_spec" : "normalizer_spec");
      const std::string_view message = in.bytes();
      if (field == 1) model.pieces.push_back(read_piece(message, source));
      if (field == 2) read_trainer_spec(message, source, model);
      if (field == 3) read_normalizer_spec(message, source, model);
    } else {
      in.skip(wire);
    }
  }
  if (model.pieces.empty()) throw InputError(source + ": not a SentencePiece model file: it has no pieces");
  return model;
}

SentencePieceModel read_sentencepiece_model(const std::filesystem::path& file) {
  return parse_sentencepiece_model(read_file(file), file.string());
}

std::string format_sentencepiece_model(const SentencePieceModel& model) {
  ProtobufEncoder out;
  for (const SentencePiece& piece : model.pieces) {
    ProtobufEncoder message;
    message.bytes_field(1, piece.piece);
    message.float_field(2, piece.score);
    message.varint_field(3, static_cast<uint64_t>(piece.type));
    out.message_field(1, message);
  }
  ProtobufEncoder trainer;
  trainer.varint_field(3, static_cast<uint64_t>(model.model_type));
  trainer.varint_field(4, model.pieces.size());  // vocab_size
  trainer.varint_field(35, model.byte_fallback ? 1 : 0);
  trainer.int64_field(40, model.unk_id);
  trainer.int64_field(41, model.bos_id);
  trainer.int64_field(42, model.eos_id);
  trainer.int64_field(43, model.pad_id);
  // The library finds its special ids by these pieces' text (bos_id() is PieceToId(bos_piece)), not
  // by the id fields above, and defaults them to "<unk>", "<s>", "</s>", "<pad>": a vocabulary
  // whose BOS is spelled otherwise (Gemma's "<bos>") would have no BOS without them.
  const auto special_piece = [&](int field, int32_t id) {
    if (id >= 0 && id < static_cast<int32_t>(model.pieces.size())) {
      trainer.bytes_field(field, model.pieces[static_cast<size_t>(id)].piece);
    }
  };
  special_piece(45, model.unk_id);
  special_piece(46, model.bos_id);
  special_piece(47, model.eos_id);
  special_piece(48, model.pad_id);
  out.message_field(2, trainer);
  ProtobufEncoder normalizer;
  normalizer.bytes_field(1, "identity");
  normalizer.varint_field(3, model.add_dummy_prefix ? 1 : 0);
  normalizer.varint_field(4, model.remove_extra_whitespaces ? 1 : 0);
  normalizer.varint_field(5, 1);  // escape_whitespaces
  out.message_field(3, normalizer);
  return out.take();
}

}  // namespace ferry::io
