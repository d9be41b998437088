// The records of the point-to-point channel (comm/point_to_point.cc, cdt/point_to_point.h): the
// wire header of a message, the operations posted, the messages kept for receives not yet posted,
// the connectors' hand-over, and one connected peer's state. Internal to that file's channel.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cdt/error.h"
#include "cdt/point_to_point.h"
#include "comm/transport/tcp_mesh.h"

namespace cdt::p2p {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMessageMagic = 0x4d504443;  // "CDPM"
struct MessageHeader {
  uint32_t magic;
  uint32_t reserved;
  int64_t tag;
  uint64_t bytes;
};
static_assert(sizeof(MessageHeader) == 24, "MessageHeader is a wire struct");

struct SendOp {
  const void* data;
  size_t bytes;
  int64_t tag;
  PointToPoint::Done done;
};

struct RecvOp {
  void* data;
  size_t bytes;
  int src;  // or kAnySource
  int64_t tag;
  PointToPoint::Done done;
  Clock::time_point deadline;
};

// A message that arrived before any receive matched it.
struct Arrived {
  int src;
  int64_t tag;
  std::vector<char> payload;
};

// What the connector threads hand to the service thread. Shared: a connector may finish after
// the channel is gone.
struct Handover {
  std::mutex mu;
  std::vector<std::pair<int, std::unique_ptr<TcpMesh>>> ready;
  std::vector<Error> failed;
  int wake_fd = -1;  // eventfd: the service thread's poll wakes on it
  Handover() : wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (wake_fd < 0) throw Error(ErrorCode::kIo, std::string("eventfd: ") + std::strerror(errno));
  }
  ~Handover() { ::close(wake_fd); }
  void Wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
  }
};

// One connected peer: service thread only.
struct Link {
  int peer = -1;
  std::unique_ptr<TcpMesh> mesh;
  int other = 1;  // the peer's rank in the 2-rank mesh
  // Outgoing: the message being sent (its header, then its bytes).
  std::optional<SendOp> sending;
  MessageHeader out_header{};
  Transfer out[2]{};
  // Incoming: a header, then the bytes into the matched receive's buffer or `scratch`.
  bool in_payload = false;
  MessageHeader in_header{};
  Transfer in{};
  std::optional<RecvOp> target;
  std::vector<char> scratch;
  // A whole header is in, but its message has no receive and the unexpected bytes are at their
  // budget: nothing more is read from this peer until a receive takes it (waiting, not silence).
  bool parked = false;
  // Bytes of the current message still to drop (its receive failed on the size), read in chunks.
  uint64_t discard_left = 0;
  Clock::time_point last_progress = Clock::now();
  uint64_t sends = 0, recvs = 0;
  bool Busy() const { return sending || in_payload || (in.done > 0 && !parked); }
};

// Chunks in which a message nobody can take is read and dropped.
constexpr size_t kDiscardChunk = 64 << 10;

}  // namespace cdt::p2p
