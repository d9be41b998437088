// ProcessGroupCDT: the engine's communicator as a torch.distributed backend ("cdt", registered by
// the cann_dist package; docs/python.md). The anchors are the third-party c10d backends (torch-ucc,
// Intel's oneCCL bindings): an object whose collectives return a c10d::Work at once and complete
// on the engine's own thread. On PyTorch 1.13 that object is a c10d::ProcessGroup; from 2.0 on it
// is a c10d::Backend, which torch's ProcessGroup holds per device type (torch dispatches each
// collective to it); the collectives' signatures are the same in both (`CdtBackendBase`).
//
// Each collective is submitted to the communicator (asynchronous, in submission order) and handed
// to one completion thread, which waits for it in order, copies results where the tensors were
// not contiguous, and completes the Work and its Future (DDP's reducer reads the Future). A failed
// collective completes its Work with the engine's error — which names this rank, the peer and the
// operation — and `wait()` raises it in Python as a RuntimeError; the communicator's timeout
// bounds every wait, so a dead or stopped peer never hangs a rank.
//
// Supported: allreduce, allreduce_coalesced, reduce, reduce_scatter, _reduce_scatter_base (SUM,
// AVG, PRODUCT, MIN, MAX; BAND, BOR, BXOR on integers and bool; PREMUL_SUM on 2.x), broadcast,
// allgather, _allgather_base, allgather_coalesced, gather, scatter, alltoall, alltoall_base
// (uneven splits), on 2.x allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced,
// barrier, send, recv (with tags, and from any source: cdt/point_to_point.h), on dense CPU
// tensors; reductions on float32, float64, float16, bfloat16,
// int64, int32, int16, int8, uint8 and bool (complex ones torch hands over as their real views),
// data movement on any dtype. Anything else raises a clear
// error naming the call (the base class does so for the calls not overridden here). The calls
// beyond DDP's are in process_group_ops.cc.
#pragma once

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "cdt/error.h"
#include "cdt/point_to_point.h"
#include "cdt/store.h"
#include "cdt/tcp_communicator.h"
#include "python/serial_queue.h"

namespace cdt::python {

#if TORCH_VERSION_MAJOR >= 2
using CdtBackendBase = ::c10d::Backend;
#else
using CdtBackendBase = ::c10d::ProcessGroup;
#endif

// Destroys `queue` (running what it holds) with the GIL released if this thread holds it.
void DrainWithoutGil(std::unique_ptr<SerialQueue>& queue);

struct ProcessGroupOptions {
  std::string secret;          // CDT_JOB_SECRET ("" = the store's generation token alone)
  std::string job_id = "cdt";  // store namespace
  std::string advertise_host = "127.0.0.1";  // what peers dial (CDT_NODE_ADDR)
  std::string bind_host;                     // empty: the advertised address only
  bool shared_memory = true;                 // same-node ranks share memory (CDT_SHM=0: TCP only)
  bool encrypt = false;                      // CDT_ENCRYPT=1: sealed frames between ranks
  bool allow_insecure = false;               // CDT_ALLOW_INSECURE=1: no secret beyond loopback
  // CDT_INLINE_MAX_BYTES: collectives up to this size with nothing queued run on the calling
  // thread (CommunicatorOptions::inline_max_bytes).
  size_t inline_max_bytes = CommunicatorOptions{}.inline_max_bytes;
  // CDT_SHM_SINGLE_COPY=0: same-node all-to-all copies through the shared slots even where the
  // ranks can read each other's memory (CommunicatorOptions::shm_single_copy).
  bool shm_single_copy = true;
};

class ProcessGroupCDT : public CdtBackendBase {
 public:
  // Forms the group through `store` (every rank of the group calls this at the same time).
  ProcessGroupCDT(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                  std::chrono::milliseconds timeout, const ProcessGroupOptions& options);
  // Over a communicator someone else owns (an elastic generation's, python/elastic_run.h): the
  // owner calls Detach() before the communicator goes; calls after it raise.
  ProcessGroupCDT(Communicator* borrowed, int rank, int size);
  ~ProcessGroupCDT() override;

  const std::string getBackendName() const override { return "cdt"; }
  // The engine's communicator underneath (the compression hook submits to it); raises once
  // detached.
  Communicator& communicator() {
    std::lock_guard<std::mutex> lock(mu_);
    return Comm("communicator");
  }

  // The first collective that failed in the communicator (its engine error: kPeerLost, kTimeout,
  // kAborted ...), if one did: the group is broken.
  std::optional<Error> failure() const;
  // Records `e` as the group's failure if none is yet: what else submits to the communicator
  // (the compression hook) reports its engine errors here, so that elastic.run sees a peer lost
  // inside a hook as a recoverable failure of the group, not as the user's error.
  void NoteFailure(const Error& e);
  // Waits for what is pending (the communicator should be aborted first, so that it fails at
  // once), then lets go of the communicator: later calls raise "this group has ended".
  void Detach();
#if TORCH_VERSION_MAJOR >= 2
  // torch.distributed.destroy_process_group: returns once every collective submitted has
  // completed (each within the group's timeout) and its completion task is gone, while threads
  // may still take the GIL (python/serial_queue.h says why that matters at exit).
  void shutdown() override;
#endif

  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;

  // process_group_ops.cc
  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& output_splits,
                                                 std::vector<int64_t>& input_splits,
                                                 const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
#if TORCH_VERSION_MAJOR >= 2
  // all_gather_into_tensor and reduce_scatter_tensor over lists of tensors in one collective each
  // (torch's _coalescing_manager; FSDP2).
  c10::intrusive_ptr<::c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override;
#endif
  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                        int tag) override;
  // torch.distributed.recv / irecv with no src: the first message with the tag from any rank;
  // the Work's source rank says whose.
  c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override;

 private:
  class WorkCDT;
  // Hands `work` to the completion queue (or completes it at once when it is done and the queue
  // idle); `after` runs on success, before the Work completes (copies back into tensors that were
  // not contiguous). Called under mu_.
  // Waits for `work`, runs `after`, completes `handle`; keeps the first failure in failure_.
  void Complete(Work& work, WorkCDT& handle, const std::function<void()>& after, bool holding_mu);
  c10::intrusive_ptr<::c10d::Work> Track(::c10d::OpType type, std::shared_ptr<Work> work,
                                         std::vector<at::Tensor> outputs,
                                         std::function<void()> after = nullptr);

  // The communicator to submit to, under mu_; raises once detached.
  Communicator& Comm(const char* call);
  // Send/recv with tags and from any source (cdt/point_to_point.h), formed at the first use,
  // under mu_; null for a group over a borrowed communicator (no store of its own).
  PointToPoint* P2P(const char* call);
  // A message to or from `peer` (kAnySource for a receive from anyone), completing its Work from
  // the channel's thread.
  c10::intrusive_ptr<::c10d::Work> PointToPointOp(::c10d::OpType type,
                                                  std::vector<at::Tensor>& tensors, int peer,
                                                  int tag, const char* call);
  // A root or peer rank of this group, or a torch error naming `call`.
  void CheckRoot(int64_t root, const char* call) const;

  std::shared_ptr<Store> store_;       // null over a borrowed communicator
  CommunicatorOptions options_;        // what the group formed with (the point-to-point channel's)
  std::unique_ptr<PointToPoint> p2p_;  // under mu_; destroyed before completions_
  std::unique_ptr<Communicator> owned_;
  mutable std::mutex mu_;
  Communicator* comm_ = nullptr;              // owned_ or borrowed; null once detached
  std::unique_ptr<SerialQueue> completions_;  // destroyed first: waits for what is pending
  std::optional<Error> failure_;              // under mu_
};

// The "cdt" backend behind a Python-side process group (torch.distributed.group.WORLD, new_group's,
// DDP's): on 1.13 the group itself, on 2.x its CPU backend; null when the group is another
// backend's (gloo ...).
ProcessGroupCDT* CdtBackendOf(const c10::intrusive_ptr<::c10d::ProcessGroup>& pg);

}  // namespace cdt::python
