// Transparent huge pages for the process's large CPU tensors (see enable_huge_pages).
#pragma once

namespace ferry::cli {

// Asks torch's CPU allocator to back every CPU allocation of 2 MiB or more (weights, KV caches,
// gradients, optimizer state) with transparent huge pages (madvise MADV_HUGEPAGE), unless the
// environment already sets THP_MEM_ALLOC_ENABLE (0 turns it off). Decoding and the optimizer
// stream hundreds of megabytes per step, and on 4 KiB pages a process's speed depends on where
// its pages landed (scripts/bench-rollout.sh). Call first thing in main: torch reads the setting
// once, at its first allocation. Child processes (environments, reward commands) do not inherit it.
void enable_huge_pages();

}  // namespace ferry::cli
