#include "cli/open_files.h"

#include <sys/resource.h>

#include <string>

#include "cdt/error.h"

namespace cdt::cli {

int64_t OpenFilesNeeded(int world_size) { return 4 * int64_t{world_size - 1} + 64; }

int64_t RaiseOpenFileLimit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return -1;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return lim.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(lim.rlim_cur);
}

void CheckOpenFilesFor(int world_size, int rank) {
  const int64_t limit = RaiseOpenFileLimit();
  const int64_t needed = OpenFilesNeeded(world_size);
  if (limit >= 0 && limit < needed)
    throw Error(ErrorCode::kInvalidArgument,
                "rank " + std::to_string(rank) + ": a world of " + std::to_string(world_size) +
                    " ranks needs about " + std::to_string(needed) +
                    " open files per rank (4 sockets per peer), and this process may open " +
                    std::to_string(limit) +
                    "; raise the hard limit (ulimit -Hn, LimitNOFILE= in systemd, nofile in "
                    "/etc/security/limits.conf)");
}

}  // namespace cdt::cli
