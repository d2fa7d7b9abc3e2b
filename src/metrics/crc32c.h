// CRC-32C (Castagnoli), the checksum TFRecord framing uses (and so TensorBoard event files).
// A table-driven software version always exists; on x86 CPUs with SSE4.2 the `crc32` instruction
// is used instead, chosen once at run time, so the same binary runs on any x86-64.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry {

// CRC-32C of `data`, continuing from a previous result `crc` (0 to start): crc32c(a + b) equals
// crc32c(b, crc32c(a)). Uses the fastest available implementation.
uint32_t crc32c(std::string_view data, uint32_t crc = 0);

// The portable table-driven implementation (slicing-by-8); the reference for the hardware one.
uint32_t crc32c_software(std::string_view data, uint32_t crc = 0);

// True when this CPU has the SSE4.2 `crc32` instruction and crc32c() uses it.
bool crc32c_hardware_available();

// The SSE4.2 implementation; only call it when crc32c_hardware_available() (throws otherwise).
uint32_t crc32c_hardware(std::string_view data, uint32_t crc = 0);

// TFRecord's "masked" CRC: rotated and offset so that a CRC stored inside checksummed data does
// not checksum to a trivial value. mask = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t mask_crc32c(uint32_t crc);
uint32_t unmask_crc32c(uint32_t masked);

}  // namespace ferry
