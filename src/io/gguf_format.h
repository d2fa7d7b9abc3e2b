// The constants of the GGUF container format shared by the reader (gguf_file.h) and the writer
// (gguf_writer.h): the magic, the metadata value types (ggml's enum gguf_type) and the default
// alignment of the data section.
#pragma once

#include <cstdint>

namespace ferry::io {

inline constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kGgufAlignment = 32;  // general.alignment (ggml's default)

enum class GgufValueType : uint32_t {
  uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6, boolean = 7,
  string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

}  // namespace ferry::io
