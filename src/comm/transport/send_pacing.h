// How much a yielding mesh may keep queued toward another host: its send socket's buffer,
// sized from what TCP measured of the path (MeshOptions::yield_send_buffer_bytes and _min_bytes).
//
// A yielding mesh (the bulk channel beside an urgent one, cdt/traffic_gate.h) pauses its sends
// while the urgent side has bytes to go; whatever it already queued in its socket still leaves
// first, so the urgent bytes wait for the whole buffer to drain at the link's rate. A fixed 64 KiB
// keeps a 10 Gbit/s link with a 50 us round trip busy, but is 26 ms of queue on a 20 Mbit/s link
// (docs/benchmarks.md, "Wake-ups on slow links"). So the buffer follows the path: twice the
// bandwidth-delay product TCP measured (delivery rate × minimum round trip), between a floor and
// the fixed size. Twice, so that a buffer that itself limits the rate (rate × RTT = buffer)
// doubles at the next look, until the path, not the buffer, is the limit. Never below eight
// segments (below).
#pragma once

#include <cstddef>

namespace cdt::net {

// What the kernel measured of one TCP connection (Linux TCP_INFO).
struct PathSample {
  bool valid = false;  // the kernel reported both figures
  double delivery_bytes_per_s = 0;
  double min_rtt_s = 0;
  bool app_limited = false;  // the sender had too little to send: the rate says nothing of the path
  int mss_bytes = 0;         // the sender's segment size
};
PathSample ReadPathSample(int fd);

// The send buffer for a path sample: clamp(max(2 × rate × min RTT, 8 segments), floor, cap);
// `current` when the sample says nothing of the path (invalid, or application-limited: the sender
// ran out of bytes before the path did); `cap` when floor >= cap. Eight segments:
// a buffer of fewer than a few segments leaves the receiver delaying its ACKs (40 ms on Linux)
// for want of a second segment — on loopback, whose segments are 64 KiB, even 25 KB stalled.
int PacedSendBuffer(const PathSample& sample, int floor_bytes, int cap_bytes, int current_bytes);

}  // namespace cdt::net
