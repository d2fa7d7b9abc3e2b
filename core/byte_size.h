// Memory sizes as users write them in configs and flags: "8GiB", "512MiB", "1.5GB", "4096".
// Binary suffixes (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones (KB, MB, GB, TB) of 1000.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry {

// Parses a size; std::nullopt when the text is not one (the caller reports where it came from).
std::optional<uint64_t> parse_byte_size(std::string_view text);

// Shortest exact spelling in binary units when the size is a whole multiple ("8GiB"), else
// bytes; 0 prints as "0".
std::string format_byte_size(uint64_t bytes);

// Human rounding for reports: "1.27 GiB".
std::string format_bytes_approx(uint64_t bytes);

}  // namespace ferry
