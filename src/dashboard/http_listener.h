// The dashboard's listening socket and its connections: accepts, bounds each client, reads one
// request (http_request.h), hands it to the server's handler, writes the answer, closes.
//
// Why not cpp-httplib's Server (Debian's 0.11, which the dashboard used until issue 41): before
// any hook of it sees a request it reads the request line and every header line into buffers
// with no limit (stream_line_reader grows one byte at a time until a newline: 512 MiB without
// one cost the dashboard 1 GiB, peak RSS), reads chunked and length-less bodies to the end
// whatever set_payload_max_length says (1 GiB chunked: +2 GiB), times out per read rather than
// per request (a client dribbling a byte a second holds a thread for ever), and queues accepted
// sockets without bound behind a pool of eight threads (eight slow clients and /metrics waits).
// None of its hooks runs between accept() and those reads, so the bounds have to sit in front of
// it; once they do, nothing is left for it to do but route six paths, which server.cc does.
//
// The bounds, per connection: its request must arrive whole (TLS handshake included) within
// `request_deadline` of its accept — a whole-request deadline, not one per read — and its answer
// be written within `response_deadline`; it never holds more than the head and body limits. At
// most `max_connections` are open: when a new one arrives and all are taken, the oldest one still
// sending its request (or lingering after its answer) is shut down to make room, so slow clients
// cannot lock out a fast one (a request sent in one packet is whole in microseconds); if every
// open connection is being answered, the new one is closed at once. Each connection has a thread
// of its own (at most 2 × max_connections exist while evicted ones wind down).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "dashboard/byte_channel.h"
#include "dashboard/http_request.h"

namespace cdt::dashboard {

class TlsContext;

struct ListenerOptions {
  std::string bind = "127.0.0.1";  // a name or address getaddrinfo understands
  int port = 0;                    // 0: any free port (port() says which)
  size_t max_connections = 32;
  std::chrono::milliseconds request_deadline{5000};    // accept → the request whole
  std::chrono::milliseconds response_deadline{10000};  // the answer ready → written
  HttpLimits limits;
};

class HttpListener {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // `screen` decides on each head before its body is read; `handle` answers complete requests
  // (an exception from it becomes a 500). Both run on connection threads, concurrently. `tls`,
  // when not null, makes every connection HTTPS; it must outlive the listener.
  HttpListener(ListenerOptions options, const TlsContext* tls, HeadScreen screen, Handler handle);
  ~HttpListener();  // Stop()
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds and listens (throws cdt::Error(kIo) naming the address and the reason), then accepts
  // on a thread of its own.
  void Start();
  // Accepts no more, shuts every open connection down, returns when all threads are out.
  void Stop();
  int port() const { return port_; }

 private:
  struct Connection {
    int fd = -1;  // -1 once closed (by its own thread, under mu_)
    std::chrono::steady_clock::time_point accepted;
    bool evictable = true;  // still sending its request, or lingering after its answer
    bool evicted = false;
    bool done = false;
    std::thread thread;
  };

  void AcceptLoop();
  void Admit(int fd);
  void Serve(Connection* c);
  // Reads the request by the deadline and answers it (or the reader's refusal).
  void Converse(Connection* c, ByteChannel& channel);
  // Marks whether the connection may be shut down to make room; false once it was.
  bool SetEvictable(Connection* c, bool evictable);
  void ReapFinished();  // joins the threads of closed connections

  const ListenerOptions o_;
  const TlsContext* const tls_;
  const HeadScreen screen_;
  const Handler handle_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: Stop() writes, the accept loop wakes
  int port_ = 0;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mu_;
  std::list<Connection> connections_;  // guarded by mu_ (elements do not move)
};

}  // namespace cdt::dashboard
