// /proc/meminfo readers and the default host budget (see host_memory.h).
#include "core/host_memory.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace ferry {
namespace {

std::optional<uint64_t> meminfo(const std::string& wanted) {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == wanted) return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> host_memory_total() { return meminfo("MemTotal:"); }
std::optional<uint64_t> host_memory_available() { return meminfo("MemAvailable:"); }

uint64_t default_host_budget() {
  const std::optional<uint64_t> available = host_memory_available();
  if (!available) return 0;
  const uint64_t margin = std::max<uint64_t>(1ull << 30, *available / 10);
  return *available > margin ? *available - margin : *available / 2;
}

uint64_t resolve_host_budget(uint64_t configured) { return configured > 0 ? configured : default_host_budget(); }

}  // namespace ferry
