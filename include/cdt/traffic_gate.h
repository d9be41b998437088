// TrafficGate: precedence between two communicators over the same ranks and links.
//
// Bytes queue in the network's buffers (socket send buffers, switch and qdisc queues) in the
// order they were handed over, so a small urgent collective started behind a bulk transfer waits
// for whatever bulk data is already queued — tens of milliseconds on a slow link. Two
// communicators that share a gate fix that on the sending side: while the *urgent* one runs an
// operation, the *yielding* one hands no new bytes to its sockets (its receives go on), and its
// sockets keep little unsent data (TCP_NOTSENT_LOWAT), so the urgent bytes reach the wire after at
// most what is already in flight. Both sides keep their own submission order, identical on every
// rank, so no negotiation is needed (ByteScheduler, SOSP'19, pauses bulk transfers the same way,
// at the granularity of its partitions).
#pragma once

#include <atomic>

namespace cdt {

class TrafficGate {
 public:
  void Enter() { urgent_.fetch_add(1, std::memory_order_acq_rel); }
  void Leave() { urgent_.fetch_sub(1, std::memory_order_acq_rel); }
  bool urgent() const { return urgent_.load(std::memory_order_acquire) > 0; }

 private:
  std::atomic<int> urgent_{0};
};

}  // namespace cdt
