// Transparent huge pages for large CPU tensors (see huge_pages.h).
#include "cli/huge_pages.h"

#include <c10/core/CPUAllocator.h>

#include <cstdlib>

namespace ferry::cli {

void enable_huge_pages() {
  if (std::getenv("THP_MEM_ALLOC_ENABLE") != nullptr) return;  // the user's choice stands
  setenv("THP_MEM_ALLOC_ENABLE", "1", /*overwrite=*/0);
  // torch caches the setting at its first allocation; make one (2 MiB: at the threshold, never
  // touched), then take the variable out of the environment children inherit.
  { const c10::DataPtr probe = c10::GetCPUAllocator()->allocate(size_t{2} << 20); }
  unsetenv("THP_MEM_ALLOC_ENABLE");
}

}  // namespace ferry::cli
