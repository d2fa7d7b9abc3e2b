// The host's memory as /proc/meminfo reports it, and the default budget for the offload engine's
// host tier (offload.host_memory 0): what is available now, less a margin for the rest of the
// process and the system. Torch-free.
#pragma once

#include <cstdint>
#include <optional>

namespace ferry {

// MemTotal and MemAvailable in bytes; nullopt where /proc/meminfo is missing or lacks the key.
std::optional<uint64_t> host_memory_total();
std::optional<uint64_t> host_memory_available();

// MemAvailable less 10% (at least 1 GiB); 0 (no limit) where it cannot be read.
uint64_t default_host_budget();

// offload.host_memory when set, else default_host_budget().
uint64_t resolve_host_budget(uint64_t configured);

}  // namespace ferry
