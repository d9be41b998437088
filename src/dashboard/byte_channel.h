// One accepted connection of the dashboard as bytes in and out, plain TCP or TLS
// (tls_context.h), every call bounded by an absolute deadline: a client that sends or reads
// slowly costs its own connection's time, never more (http_listener.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace cdt::dashboard {

using Deadline = std::chrono::steady_clock::time_point;

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT) or `deadline` passes; false at the
// deadline, on POLLERR/POLLNVAL, or when poll fails. A hang-up counts as ready (the read says 0).
bool WaitForSocket(int fd, short events, Deadline deadline);

class ByteChannel {
 public:
  virtual ~ByteChannel() = default;
  // Up to `n` bytes into `buf`; 0 when the peer ended, the deadline passed, or the connection
  // failed — in every case the connection is done.
  virtual size_t Read(char* buf, size_t n, Deadline deadline) = 0;
  // Every byte of `bytes`, or false at the deadline or on an error.
  virtual bool Write(std::string_view bytes, Deadline deadline) = 0;
  // Says goodbye at the channel's level (TLS close_notify), best effort, by `deadline`.
  virtual void Finish(Deadline deadline) = 0;
};

// A non-blocking TCP socket as it is. Does not own the descriptor (the listener closes it).
class PlainChannel : public ByteChannel {
 public:
  explicit PlainChannel(int fd) : fd_(fd) {}
  size_t Read(char* buf, size_t n, Deadline deadline) override;
  bool Write(std::string_view bytes, Deadline deadline) override;
  void Finish(Deadline) override {}

 private:
  const int fd_;
};

}  // namespace cdt::dashboard
