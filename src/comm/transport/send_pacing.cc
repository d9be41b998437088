// Reads Linux's struct tcp_info from <linux/tcp.h>: glibc's <netinet/tcp.h> stops before the
// delivery rate and the minimum RTT (Linux 4.9), and the two headers cannot share a translation
// unit, so this one includes only the kernel's.
#include "comm/transport/send_pacing.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>

namespace cdt::net {

PathSample ReadPathSample(int fd) {
  PathSample s;
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return s;
  // Kernels older than the fields report a shorter struct.
  if (len < offsetof(tcp_info, tcpi_delivery_rate) + sizeof info.tcpi_delivery_rate) return s;
  if (info.tcpi_delivery_rate == 0 || info.tcpi_min_rtt == 0 || info.tcpi_min_rtt == ~0u) return s;
  s.valid = true;
  s.delivery_bytes_per_s = static_cast<double>(info.tcpi_delivery_rate);
  s.min_rtt_s = info.tcpi_min_rtt * 1e-6;
  s.app_limited = info.tcpi_delivery_rate_app_limited != 0;
  s.mss_bytes = static_cast<int>(info.tcpi_snd_mss);
  return s;
}

int PacedSendBuffer(const PathSample& sample, int floor_bytes, int cap_bytes, int current_bytes) {
  if (floor_bytes >= cap_bytes) return cap_bytes;
  if (!sample.valid || sample.app_limited) return current_bytes;
  const double want =
      std::max(2 * sample.delivery_bytes_per_s * sample.min_rtt_s, 8.0 * sample.mss_bytes);
  return static_cast<int>(
      std::clamp(want, static_cast<double>(floor_bytes), static_cast<double>(cap_bytes)));
}

}  // namespace cdt::net
