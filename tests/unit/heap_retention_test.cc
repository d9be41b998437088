// RetainFreedHeapMemory (src/common/heap_retention.h): a large block freed and allocated again, as
// every training step does, is reused without page faults; glibc's defaults fault it in anew each
// time. Each side runs in a child process, so the settings never reach this test binary.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/heap_retention.h"

namespace cdt {
namespace {

constexpr size_t kBlockBytes = 48u << 20;  // past glibc's largest automatic mmap threshold (32 MiB)
constexpr int kRounds = 4;

// One step's worth: allocate the block, write every page, free it.
void AllocateTouchFree() {
  char* p = static_cast<char*>(std::malloc(kBlockBytes));
  if (p == nullptr) ::_exit(4);
  std::memset(p, 1, kBlockBytes);
  asm volatile("" : : "r"(p) : "memory");  // the writes must happen: no dead-store elimination
  std::free(p);
}

constexpr long kRefused = -2;  // RetainFreedHeapMemory returned false (a sanitizer's allocator)

// Minor page faults of kRounds rounds after a first one, in a child process (with the settings
// applied there if `retain`); kRefused, or -1 if the child failed.
long FaultsOfRepeatedBlocks(bool retain) {
  int fd[2];
  if (::pipe(fd) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::close(fd[0]);
    if (retain && !RetainFreedHeapMemory()) ::_exit(3);
    AllocateTouchFree();
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    for (int i = 0; i < kRounds; ++i) AllocateTouchFree();
    ::getrusage(RUSAGE_SELF, &after);
    const long faults = after.ru_minflt - before.ru_minflt;
    ::_exit(::write(fd[1], &faults, sizeof faults) == sizeof faults ? 0 : 5);
  }
  ::close(fd[1]);
  long faults = -1;
  if (::read(fd[0], &faults, sizeof faults) != sizeof faults) faults = -1;
  ::close(fd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return kRefused;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? faults : -1;
}

TEST(HeapRetention, AFreedBlockIsReusedWithoutPageFaults) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "glibc's malloc only";
#endif
  const long by_default = FaultsOfRepeatedBlocks(false);
  const long retained = FaultsOfRepeatedBlocks(true);
  if (retained == kRefused) GTEST_SKIP() << "mallopt refused: malloc is not glibc's here";
  ASSERT_GE(by_default, 0);
  ASSERT_GE(retained, 0);
  // By default every round maps the block afresh: at least a fault per round (one per 4 KiB page
  // here, 12,288 a round; one per 2 MiB with transparent huge pages always on).
  EXPECT_GE(by_default, kRounds) << "glibc's defaults did not fault the block in again";
  EXPECT_LE(retained * 10, by_default) << "retained: " << retained << " faults in " << kRounds
                                       << " rounds, by default " << by_default;
}

}  // namespace
}  // namespace cdt
