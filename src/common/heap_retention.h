// Keeping freed heap memory in the process, for a program that allocates the same large blocks
// again and again (a training step's activations and gradients, an evaluation's big batches).
//
// glibc's malloc serves a block of 128 KiB or more (raising that threshold as such blocks are
// freed, but never past 32 MiB) with a mapping of its own and unmaps it on free, and it hands free
// memory at a heap's top back to the kernel past a threshold of the same order. libtorch's CPU
// tensors go through malloc, so a block past 32 MiB, and memory trimmed from a heap's top, is
// faulted in again, page by zeroed page, each time it is allocated. A 300-step cnn run on one
// worker took 1.4 million minor faults and 5 s of kernel time, most of them in evaluation, which
// ran twice as long as with the memory kept; two such workers at once in one benchmark script
// took 3.9 million faults each and trained at 0.6x the speed of one alone, 0.97x to 1.04x with the
// memory kept (docs/training.md, "Memory"). PyTorch's CPU launcher (torch.backends.xeon.run_cpu)
// answers this by preloading tcmalloc or jemalloc unless told --use-default-allocator, the flag
// `train` takes here too; glibc does the same with two settings, which is all this does: blocks
// under kRetainedMmapThreshold come from the heap, and up to kRetainedTrimThreshold of free memory
// stays at a heap's top, so a block freed is reused without a fault. The price is that the
// process keeps its peak heap, as a caching allocator does (+110 to +160 MB of resident memory
// per cnn worker).
//
// Process-wide and meant for start-up, before the allocations it should govern. With another
// allocator preloaded (LD_PRELOAD), or the user's own malloc settings (GLIBC_TUNABLES,
// MALLOC_*_), the caller leaves it alone (cli/environment.h says which).
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace cdt {

inline constexpr int kRetainedMmapThreshold = 1 << 30;  // 1 GiB: mallopt takes an int
inline constexpr int kRetainedTrimThreshold = 1 << 30;

// Returns false where the C library is not glibc, or glibc refused a setting (then neither may
// have been applied; the allocator behaves as it did).
inline bool RetainFreedHeapMemory() {
#if defined(__GLIBC__)
  return ::mallopt(M_MMAP_THRESHOLD, kRetainedMmapThreshold) == 1 &&
         ::mallopt(M_TRIM_THRESHOLD, kRetainedTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace cdt
