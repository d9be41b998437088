// Collectives on device memory through pinned host staging, chunked and pipelined.
//
// An allreduce of a device buffer runs in chunks of StagingOptions::chunk_bytes through `slots`
// pinned host buffers: while the host reduces chunk i (the communicator's own collective, over
// shared memory and TCP as for CPU tensors), the copy-out of the next chunks and the copy-in of
// chunk i-1 run on the engine's two streams (device to host, host to device). Stream order is
// torch's:
//   * the collective waits for the work the caller queued on its stream before the call (an
//     event recorded there at submission; the engine's copy-out stream waits for it on the
//     device — no host synchronisation);
//   * DeviceWork::Wait() blocks the calling thread only until the host side is done (the last
//     copy-in queued), then makes the caller's stream wait for the copy-ins on the device; work the
//     caller queues on its stream afterwards sees the result. Nothing calls cudaDeviceSynchronize.
//
// Contract:
//   * Operations run one at a time in submission order on a thread of their own, which submits
//     each chunk's host collective to `comm`: every rank must submit the same device operations in
//     the same order, and while one is pending nothing else may be submitted to `comm` (give
//     DeviceCollectives a communicator of its own, or wait first).
//   * Failures are the communicator's (cdt/communicator.h): a lost or silent peer fails the
//     operation with its cdt::Error, which Wait() rethrows; the communicator is then broken and
//     every later operation fails with kAborted. A device that reports a fault, or a copy that does
//     not complete within the communicator's timeout, fails the operation with kIo / kTimeout
//     naming the device and the chunk, and aborts the communicator so that the peers fail fast too.
//   * A failed operation may leave the device buffer partly reduced (as on CPU tensors). After a
//     copy timed out, the copies queued behind it still run once the device moves again: keep
//     the buffer allocated until the caller's stream has drained (the error says so).
//   * The device buffer and the caller's stream must outlive the operation's Wait().
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "cdt/communicator.h"
#include "cdt/device.h"
#include "cdt/types.h"

namespace cdt {

struct StagingOptions {
  // Bytes per chunk; a buffer of at most one chunk is one copy-out, one host collective, one
  // copy-in. Rounded down to whole elements (at least one).
  size_t chunk_bytes = size_t{4} << 20;
  // Pinned host buffers of chunk_bytes each: how many chunks are between copy-out and copy-in at
  // once (2 or more; 3 lets copy-out of i+1, reduction of i and copy-in of i-1 overlap).
  int slots = 3;
  // How long a copy may take before the operation fails with kTimeout (a kernel of the caller's
  // that never ends, a hung device). Host collectives keep the communicator's own timeout.
  std::chrono::milliseconds copy_timeout{30000};
  // The communicator's timeout (CommunicatorOptions::timeout): Wait() gives up on an operation
  // that moved nothing for 2 x copy_timeout + this.
  std::chrono::milliseconds host_timeout{30000};
};

// One device operation: a cdt::Work (Wait, Completed, run_seconds) whose Wait also orders the
// caller's stream after the result.
class DeviceWork : public Work {
 public:
  // Blocks until the host side finished (bounded as for the communicator's operations), rethrows
  // its error, then makes `stream` wait on the device for the result.
  virtual void WaitOn(DeviceStream& stream) = 0;
  // The event that completes when the result is in device memory; null until the host side
  // finished, and after a failure.
  virtual std::shared_ptr<DeviceEvent> completion() const = 0;
};

class DeviceCollectives {
 public:
  // `comm` and `device` must outlive this object. Allocates slots x chunk_bytes of pinned memory
  // and two streams of `device`.
  DeviceCollectives(Communicator& comm, Device& device, StagingOptions options = {});
  // Lets queued operations finish (each bounded by the communicator's timeout); Abort() first to
  // drop them.
  ~DeviceCollectives();
  DeviceCollectives(const DeviceCollectives&) = delete;
  DeviceCollectives& operator=(const DeviceCollectives&) = delete;

  // In-place allreduce of `count` elements of device memory. `caller`: the stream whose earlier
  // work produced `data`; Wait() (Work's) orders that same stream after the result.
  std::shared_ptr<DeviceWork> Allreduce(DeviceStream& caller, void* data, size_t count,
                                        DataType dtype, ReduceOp op, AllreduceOptions options = {});
  // In-place broadcast of `count` elements of device memory from `root`.
  std::shared_ptr<DeviceWork> Broadcast(DeviceStream& caller, void* data, size_t count,
                                        DataType dtype, int root);

  // Aborts the communicator and fails the queued operations with kAborted. Any thread.
  void Abort();

  const StagingOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cdt
