#include "dashboard/byte_channel.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

namespace cdt::dashboard {

bool WaitForSocket(int fd, short events, Deadline deadline) {
  for (;;) {
    // Rounded up: false means the deadline has passed, not that it is under a millisecond away.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) continue;  // the loop's head decides whether the deadline passed
    return (p.revents & (POLLERR | POLLNVAL)) == 0;
  }
}

size_t PlainChannel::Read(char* buf, size_t n, Deadline deadline) {
  for (;;) {
    const ssize_t got = ::recv(fd_, buf, n, MSG_DONTWAIT);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) return 0;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return 0;
    if (!WaitForSocket(fd_, POLLIN, deadline)) return 0;
  }
}

bool PlainChannel::Write(std::string_view bytes, Deadline deadline) {
  while (!bytes.empty()) {
    const ssize_t put = ::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (put > 0) {
      bytes.remove_prefix(static_cast<size_t>(put));
      continue;
    }
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (!WaitForSocket(fd_, POLLOUT, deadline)) return false;
  }
  return true;
}

}  // namespace cdt::dashboard
