#include "python/process_group.h"

#include <ATen/core/ivalue.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <utility>

#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "python/c10d_store.h"
#include "python/tensor_args.h"

namespace cdt::python {

class ProcessGroupCDT::WorkCDT : public ::c10d::Work {
 public:
  WorkCDT(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs)
      : ::c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // For a receive: the rank the message came from (a receive from any source learns it).
  int sourceRank() const override { return source_.load(); }
  void SetSource(int rank) { source_.store(rank); }

  void Complete(std::exception_ptr error) {
    finish(error);
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(outputs_));
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<int> source_{-1};
};

namespace {

// Runs `f` with the GIL released if this thread holds it: what `f` joins may need the GIL.
template <typename F>
void WithoutGil(F&& f) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    f();
  } else {
    f();
  }
}

}  // namespace

ProcessGroupCDT::ProcessGroupCDT(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                                 std::chrono::milliseconds timeout, const ProcessGroupOptions& o)
    : CdtBackendBase(rank, size), store_(std::make_shared<C10dStore>(store)) {
  CommunicatorOptions co;
  co.rank = rank;
  co.size = size;
  co.job_id = o.job_id;
  co.secret = o.secret;
  co.advertise_host = o.advertise_host;
  co.bind_host = o.bind_host;
  co.shared_memory = o.shared_memory;
  co.encrypt = o.encrypt;
  co.allow_insecure = o.allow_insecure;
  co.timeout = timeout;
  co.inline_max_bytes = o.inline_max_bytes;
  co.shm_single_copy = o.shm_single_copy;
  options_ = co;
  try {
    owned_ = ConnectTcpCommunicator(*store_, co);
  } catch (const Error& e) {
    TORCH_CHECK(false, "cdt backend: rank ", rank, " of ", size,
                " could not form the group: ", e.what());
  }
  comm_ = owned_.get();
  completions_ = std::make_unique<SerialQueue>();
}

ProcessGroupCDT::ProcessGroupCDT(Communicator* borrowed, int rank, int size)
    : CdtBackendBase(rank, size), comm_(borrowed) {
  completions_ = std::make_unique<SerialQueue>();
}

std::optional<Error> ProcessGroupCDT::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void ProcessGroupCDT::NoteFailure(const Error& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_) failure_ = e;
}

void ProcessGroupCDT::Detach() {
  std::unique_ptr<SerialQueue> pending;
  std::unique_ptr<PointToPoint> p2p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p2p = std::move(p2p_);
  }
  WithoutGil([&] { p2p.reset(); });  // fails what is pending with kAborted
  {
    std::lock_guard<std::mutex> lock(mu_);
    comm_ = nullptr;
    pending = std::move(completions_);
  }
  DrainWithoutGil(pending);
}

#if TORCH_VERSION_MAJOR >= 2
void ProcessGroupCDT::shutdown() {
  SerialQueue* queue = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue = completions_.get();
  }
  if (queue == nullptr) return;  // detached: drained already
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    queue->WaitIdle();
  } else {
    queue->WaitIdle();
  }
}
#endif

Communicator& ProcessGroupCDT::Comm(const char* call) {
  TORCH_CHECK(comm_ != nullptr, "cdt backend: rank ", getRank(), ": ", call,
              ": this process group has ended (its elastic generation is over, or the group was "
              "destroyed); use the current one (torch.distributed's default group)");
  return *comm_;
}

ProcessGroupCDT* CdtBackendOf(const c10::intrusive_ptr<::c10d::ProcessGroup>& pg) {
  if (!pg) return nullptr;
#if TORCH_VERSION_MAJOR >= 2
  try {
    return dynamic_cast<ProcessGroupCDT*>(pg->getBackend(c10::DeviceType::CPU).get());
  } catch (const c10::Error&) {
    return nullptr;  // no CPU backend in this group
  }
#else
  return dynamic_cast<ProcessGroupCDT*>(pg.get());
#endif
}

void DrainWithoutGil(std::unique_ptr<SerialQueue>& queue) {
  WithoutGil([&] { queue.reset(); });
}

ProcessGroupCDT::~ProcessGroupCDT() {
  WithoutGil([&] { p2p_.reset(); });  // its thread completes Works, which may take the GIL
  DrainWithoutGil(completions_);      // each pending wait is bounded by the communicator's timeout
  comm_ = nullptr;
}

void ProcessGroupCDT::Complete(Work& work, WorkCDT& handle, const std::function<void()>& after,
                               bool holding_mu) {
  try {
    work.Wait();
    if (after) after();
    handle.Complete(nullptr);
  } catch (const Error& e) {
    {
      std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
      if (!holding_mu) lock.lock();
      if (!failure_) failure_ = e;
    }
    handle.Complete(std::current_exception());
  } catch (...) {
    handle.Complete(std::current_exception());
  }
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::Track(::c10d::OpType type,
                                                        std::shared_ptr<Work> work,
                                                        std::vector<at::Tensor> outputs,
                                                        std::function<void()> after) {
  auto handle = c10::make_intrusive<WorkCDT>(getRank(), type, std::move(outputs));
  // Already done (a small collective the communicator ran on this thread) and nothing ahead of it
  // to complete first: complete it here. The two thread hand-offs it saves were most of the
  // ~115 us a 1 KiB all_gather_into_tensor from Python added to the engine's 20 on 4 ranks
  // sharing 2 cores (docs/benchmarks.md, "Small collectives on the caller's thread").
  if (work->Completed() && completions_->Idle()) {
    Complete(*work, *handle, after, /*holding_mu=*/true);
    return handle;
  }
  completions_->Post([this, work = std::move(work), handle, after = std::move(after)] {
    Complete(*work, *handle, after, /*holding_mu=*/false);
  });
  return handle;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::broadcast(std::vector<at::Tensor>& tensors,
                                                            const ::c10d::BroadcastOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const at::Tensor& t = One(tensors, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "cdt backend: broadcast: root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  std::function<void()> after;
  at::Tensor c = Contiguous(t, &after);
  auto work = Comm("broadcast")
                  .Broadcast(c.data_ptr(), static_cast<size_t>(c.nbytes()), kBytes,
                             static_cast<int>(opts.rootRank));
  return Track(::c10d::OpType::BROADCAST, std::move(work), tensors, std::move(after));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::allreduce(std::vector<at::Tensor>& tensors,
                                                            const ::c10d::AllreduceOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const at::Tensor& t = One(tensors, "allreduce");
  const DataType dtype = ToDataType(t, "allreduce");
  const ReduceOp op = ToReduceOp(opts.reduceOp, dtype, "allreduce");
  std::function<void()> after;
  at::Tensor c = Premultiplied(opts.reduceOp, Contiguous(t, &after), /*in_place=*/true);
  auto work = Comm("allreduce").Allreduce(c.data_ptr(), static_cast<size_t>(c.numel()), dtype, op);
  return Track(::c10d::OpType::ALLREDUCE, std::move(work), tensors, std::move(after));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions&) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const at::Tensor& in = One(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "cdt backend: allgather: one output list of ", getSize(), " tensors");
  for (const at::Tensor& o : outputs[0]) {
    CheckDense(o, "allgather");
    TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                "cdt backend: allgather: every output tensor must match the input's size and type");
  }
  const at::Tensor src = in.contiguous();
  at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
  auto work =
      Comm("allgather")
          .Allgather(src.data_ptr(), flat.data_ptr(), static_cast<size_t>(in.nbytes()), kBytes);
  std::vector<at::Tensor> outs = outputs[0];
  auto after = [outs, flat, src, n = in.numel()]() mutable {
    for (size_t r = 0; r < outs.size(); ++r)
      outs[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(outs[r].sizes()));
  };
  return Track(::c10d::OpType::ALLGATHER, std::move(work), outs, std::move(after));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::_allgather_base(at::Tensor& output,
                                                                  at::Tensor& input,
                                                                  const ::c10d::AllgatherOptions&) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  CheckDense(input, "_allgather_base");
  CheckDense(output, "_allgather_base");
  TORCH_CHECK(
      output.numel() == getSize() * input.numel() && output.scalar_type() == input.scalar_type(),
      "cdt backend: _allgather_base: the output must hold world size x the input");
  const at::Tensor src = input.contiguous();
  std::function<void()> after;
  at::Tensor out = Contiguous(output, &after);
  auto work =
      Comm("allgather")
          .Allgather(src.data_ptr(), out.data_ptr(), static_cast<size_t>(input.nbytes()), kBytes);
  auto keep = [after, src]() {
    if (after) after();
  };
  return Track(::c10d::OpType::_ALLGATHER_BASE, std::move(work), {output}, std::move(keep));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const at::Tensor& out = One(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "cdt backend: reduce_scatter: one input list of ", getSize(), " tensors");
  for (const at::Tensor& i : inputs[0]) {
    CheckDense(i, "reduce_scatter");
    TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                "cdt backend: reduce_scatter: every input tensor must match the output's size "
                "and type");
  }
  std::vector<at::Tensor> flat_inputs;
  for (const at::Tensor& i : inputs[0]) flat_inputs.push_back(i.reshape({-1}));
  const at::Tensor flat = Premultiplied(opts.reduceOp, at::cat(flat_inputs), /*in_place=*/true);
  std::function<void()> after;
  at::Tensor o = Contiguous(out, &after);
  const DataType dtype = ToDataType(out, "reduce_scatter");
  auto work =
      Comm("reduce_scatter")
          .ReduceScatter(flat.data_ptr(), o.data_ptr(), std::vector<size_t>(getSize(), out.numel()),
                         dtype, ToReduceOp(opts.reduceOp, dtype, "reduce_scatter"));
  auto keep = [after, flat]() {
    if (after) after();
  };
  return Track(::c10d::OpType::REDUCE_SCATTER, std::move(work), outputs, std::move(keep));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  CheckDense(input, "_reduce_scatter_base");
  CheckDense(output, "_reduce_scatter_base");
  TORCH_CHECK(
      input.numel() == getSize() * output.numel() && output.scalar_type() == input.scalar_type(),
      "cdt backend: _reduce_scatter_base: the input must hold world size x the output");
  const at::Tensor src = Premultiplied(opts.reduceOp, input.contiguous(), /*in_place=*/false);
  std::function<void()> after;
  at::Tensor o = Contiguous(output, &after);
  const DataType dtype = ToDataType(output, "_reduce_scatter_base");
  auto work = Comm("reduce_scatter")
                  .ReduceScatter(src.data_ptr(), o.data_ptr(),
                                 std::vector<size_t>(getSize(), output.numel()), dtype,
                                 ToReduceOp(opts.reduceOp, dtype, "_reduce_scatter_base"));
  auto keep = [after, src]() {
    if (after) after();
  };
  return Track(::c10d::OpType::_REDUCE_SCATTER_BASE, std::move(work), {output}, std::move(keep));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::barrier(const ::c10d::BarrierOptions&) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  return Track(::c10d::OpType::BARRIER, Comm("barrier").Barrier(), {});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::send(std::vector<at::Tensor>& tensors, int dst,
                                                       int tag) {
  return PointToPointOp(::c10d::OpType::SEND, tensors, dst, tag, "send");
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::recv(std::vector<at::Tensor>& tensors, int src,
                                                       int tag) {
  return PointToPointOp(::c10d::OpType::RECV, tensors, src, tag, "recv");
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                int tag) {
  return PointToPointOp(::c10d::OpType::RECVANYSOURCE, tensors, PointToPoint::kAnySource, tag,
                        "recv from any source");
}

PointToPoint* ProcessGroupCDT::P2P(const char* call) {
  Comm(call);  // raises once detached
  if (!store_) return nullptr;
  if (!p2p_) {
    try {
      p2p_ = CreatePointToPoint(store_, options_);
    } catch (const Error& e) {
      TORCH_CHECK(false, "cdt backend: ", call, ": ", e.what());
    }
  }
  return p2p_.get();
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::PointToPointOp(::c10d::OpType type,
                                                                 std::vector<at::Tensor>& tensors,
                                                                 int peer, int tag,
                                                                 const char* call) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const at::Tensor& t = One(tensors, call);
  const bool sending = type == ::c10d::OpType::SEND;
  TORCH_CHECK((peer >= 0 && peer < getSize() && peer != getRank()) ||
                  (!sending && peer == PointToPoint::kAnySource),
              "cdt backend: ", call, ": rank ", peer, " is not another rank of this group of ",
              getSize());
  std::function<void()> after;
  const at::Tensor c = sending ? t.contiguous() : Contiguous(t, &after);
  const auto bytes = static_cast<size_t>(c.nbytes());
  PointToPoint* p2p = P2P(call);
  if (p2p == nullptr) {
    // An elastic generation's group (a borrowed communicator, no store of its own): the
    // communicator's own ordered stream per pair of ranks, untagged.
    TORCH_CHECK(tag == 0 && peer != PointToPoint::kAnySource, "cdt backend: ", call,
                ": tags and receives from any source need a group formed through a store "
                "(init_process_group or new_group); in cann_dist.elastic.run's group, name the "
                "peer and use tag 0");
    auto work = sending ? Comm(call).Send(c.data_ptr(), bytes, peer)
                        : Comm(call).Recv(c.data_ptr(), bytes, peer);
    auto keep = [c, after]() {
      if (after) after();
    };
    return Track(type, std::move(work), tensors, std::move(keep));
  }
  auto handle = c10::make_intrusive<WorkCDT>(getRank(), type, tensors);
  // Runs on the channel's thread (or here): completes the Work, copying a received message into a
  // tensor that was not contiguous first. `c` keeps the buffer alive until then.
  auto done = [handle, c, after](int source, const Error* error) {
    std::exception_ptr failure;
    if (error != nullptr) {
      failure = std::make_exception_ptr(Error(error->code(), error->what(), error->context()));
    } else if (after) {
      try {
        after();
      } catch (...) {
        failure = std::current_exception();
      }
    }
    if (!failure) handle->SetSource(source);
    handle->Complete(failure);
  };
  if (sending)
    p2p->Send(c.data_ptr(), bytes, peer, tag, std::move(done));
  else
    p2p->Recv(c.data_ptr(), bytes, peer, tag, std::move(done));
  return handle;
}

}  // namespace cdt::python
