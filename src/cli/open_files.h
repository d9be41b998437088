// The open-files limit a job needs. Every rank holds four sockets per peer (a latency and a bulk
// channel, one connection per direction), so a world of N ranks needs about 4(N - 1) + 64
// descriptors per rank, and the process hosting the store one more per rank. Linux's default soft
// limit (1024) is past at 240 ranks; its hard limit usually is not.
#pragma once

#include <cstdint>

namespace cdt::cli {

// Descriptors a rank of a world of `world_size` needs (see above).
int64_t OpenFilesNeeded(int world_size);

// Raises the soft RLIMIT_NOFILE to the hard one; returns the limit in force afterwards.
int64_t RaiseOpenFileLimit();

// Throws cdt::Error(kInvalidArgument) naming the rank, the need and the limit when this process
// cannot hold a world of `world_size`.
void CheckOpenFilesFor(int world_size, int rank);

}  // namespace cdt::cli
