// DeviceCollectives (cdt/device_collectives.h): a thread that runs device operations one at a
// time through pinned staging slots. The pipeline of one operation, with K slots and chunks
// 0..n-1 (slot s = i mod K):
//
//   copy-out stream:  wait(caller's ready event); for i < K: [wait slot_free[s]] D2H(i -> s)
//   this thread:      for each i: wait D2H(i) done (host); host collective on slot s (blocking);
//                     queue H2D(s -> i) on the copy-in stream, slot_free[s] = its event;
//                     queue D2H(i+K -> s) after slot_free[s] on the copy-out stream
//   completion:       an event on the copy-in stream after the last H2D
//
// so that while the host reduces chunk i, copy-outs of i+1.. and the copy-in of i-1 are in flight
// on the device's two copy engines. The slots' events outlive an operation: the next one's first
// copy-outs wait for the previous one's copy-ins from the same slot.
#include "cdt/device_collectives.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_name.h"
#include "device/staged_work.h"

namespace cdt {
namespace {

// What one operation does around the pipeline: whether this rank copies its chunks out and the
// results back in, and the host collective of one chunk.
struct Stages {
  bool copy_out = true;
  bool copy_in = true;
  std::function<std::shared_ptr<Work>(void* slot, size_t count)> host;
};

}  // namespace

class DeviceCollectives::Impl {
 public:
  Impl(Communicator& comm, Device& device, StagingOptions options)
      : comm_(comm), device_(device), options_(options) {
    if (options_.slots < 2)
      throw Error(ErrorCode::kInvalidArgument,
                  "StagingOptions::slots = " + std::to_string(options_.slots) +
                      ": the staging pipeline needs at least 2 pinned buffers (3 overlaps "
                      "copy-out, reduction and copy-in)");
    options_.chunk_bytes = std::max<size_t>(options_.chunk_bytes, 64);
    out_ = device_.NewStream();
    in_ = device_.NewStream();
    for (int s = 0; s < options_.slots; ++s)
      slots_.push_back(device_.AllocatePinned(options_.chunk_bytes));
    slot_free_.resize(slots_.size());
    thread_ = std::thread([this] { Loop(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    // Copies may still be queued behind a copy that timed out; they read and write the slots.
    // A host stand-in's stream runs its queue as it goes; a CUDA stream's work outlives
    // cudaStreamDestroy, so when the drain did not finish the slots are left allocated on purpose
    // (a hung device's DMA into freed pinned memory would be worse than the leak).
    const std::vector<std::shared_ptr<DeviceEvent>> drained = DrainStreams();
    out_.reset();
    in_.reset();
    for (const auto& event : drained) {
      bool done = false;
      try {
        done = event->Done();
      } catch (...) {  // a faulted device: its copies will not run
        done = true;
      }
      if (!done) {
        for (auto& slot : slots_) new std::shared_ptr<void>(std::move(slot));  // deliberate leak
        break;
      }
    }
  }

  std::shared_ptr<DeviceWork> Submit(DeviceStream& caller, std::string what, void* data,
                                     size_t count, DataType dtype, Stages stages) {
    const uint64_t seq = ++submitted_;
    auto work = std::make_shared<StagedWork>(
        "device " + what + " #" + std::to_string(seq) + " (" + DataTypeName(dtype) + " x " +
            std::to_string(count) + " on " + device_.name() + ") on rank " +
            std::to_string(comm_.rank()),
        caller, BackstopWait(), progress_, [this](const std::string&) { AbortComm(); });
    // The caller's earlier work on its stream, recorded now: the copy-outs wait for it.
    std::shared_ptr<DeviceEvent> ready = caller.Record();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back([this, work, ready, data, count, dtype, stages = std::move(stages)] {
        Run(*work, *ready, static_cast<char*>(data), count, ElementSize(dtype), stages);
      });
      works_.push_back(work);
    }
    cv_.notify_all();
    return work;
  }

  void AbortComm() { comm_.Abort(); }

  // Work::Wait()'s own bound: the operation's waits end by themselves (copies after copy_timeout,
  // host collectives after the communicator's timeout, StagingOptions::host_timeout); this is the
  // backstop.
  std::chrono::milliseconds BackstopWait() const {
    return 2 * options_.copy_timeout + options_.host_timeout;
  }

  const StagingOptions& options() const { return options_; }
  Communicator& comm() { return comm_; }

 private:
  void Loop() {
    NameThisThread("cdt-device");
    for (;;) {
      std::function<void()> task;
      std::shared_ptr<StagedWork> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
        work = std::move(works_.front());
        works_.pop_front();
      }
      progress_->fetch_add(1, std::memory_order_relaxed);
      work->MarkStarted();
      if (broken_) {  // as the communicator's contract: later operations fail at once
        work->Finish(nullptr, std::make_exception_ptr(
                                  Error(ErrorCode::kAborted, work->description() +
                                                                 ": an earlier device operation "
                                                                 "failed: " +
                                                                 *broken_)));
        continue;
      }
      try {
        task();
      } catch (...) {
        Fail(*work, std::current_exception());
      }
      progress_->fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Device events are waited for with a deadline: a caller's kernel that never ends, or a hung
  // device, fails the operation instead of blocking the queue for ever.
  void Await(const DeviceEvent& event, StagedWork& work, const std::string& what) {
    if (event.WaitFor(options_.copy_timeout)) return;
    throw Error(ErrorCode::kTimeout,
                work.description() + ": " + what + " did not complete within " +
                    std::to_string(options_.copy_timeout.count()) +
                    " ms (a kernel queued on the caller's stream before the collective still "
                    "runs, or the device hangs); the communicator was aborted. The copies already "
                    "queued run once the stream moves again: keep the buffer allocated until the "
                    "caller's stream has drained");
  }

  void Run(StagedWork& work, const DeviceEvent& ready, char* data, size_t count, size_t element,
           const Stages& stages) {
    const size_t per_chunk = std::max<size_t>(1, options_.chunk_bytes / element);
    const size_t chunks = (count + per_chunk - 1) / per_chunk;
    const size_t k = slots_.size();
    std::vector<std::shared_ptr<DeviceEvent>> out_done(k);
    auto elements = [&](size_t i) { return std::min(per_chunk, count - i * per_chunk); };
    auto issue_out = [&](size_t i) {
      const size_t s = i % k;
      if (slot_free_[s]) out_->Wait(*slot_free_[s]);
      if (stages.copy_out)
        out_->CopyToHost(slots_[s].get(), data + i * per_chunk * element, elements(i) * element);
      out_done[s] = out_->Record();
    };
    out_->Wait(ready);
    // After the previous operation's copy-ins (an operation on the same buffer may be submitted
    // before the previous one was waited for, with other chunk boundaries).
    out_->Wait(*in_->Record());
    for (size_t i = 0; i < std::min(k, chunks); ++i) issue_out(i);
    for (size_t i = 0; i < chunks; ++i) {
      const size_t s = i % k;
      Await(*out_done[s], work, "the copy-out of chunk " + std::to_string(i));
      stages.host(slots_[s].get(), elements(i))->Wait();
      progress_->fetch_add(1, std::memory_order_relaxed);
      if (stages.copy_in)
        in_->CopyToDevice(data + i * per_chunk * element, slots_[s].get(), elements(i) * element);
      slot_free_[s] = in_->Record();
      if (i + k < chunks) issue_out(i + k);
    }
    work.Finish(in_->Record(), nullptr);
  }

  // A failed operation: abort the communicator (the peers fail fast, later operations with
  // kAborted), let the copies already queued end (they read and write the caller's buffer), then
  // hand the error to the Work.
  // Waits, within copy_timeout per stream, for the copies queued on the engine's streams; the
  // events it waited for (one may not be done).
  std::vector<std::shared_ptr<DeviceEvent>> DrainStreams() {
    std::vector<std::shared_ptr<DeviceEvent>> events;
    for (DeviceStream* stream : {out_.get(), in_.get()}) {
      try {
        events.push_back(stream->Record());
        events.back()->WaitFor(options_.copy_timeout);
      } catch (...) {  // the device's own fault: whoever waited for an operation was told
      }
    }
    return events;
  }

  void Fail(StagedWork& work, std::exception_ptr error) {
    comm_.Abort();
    if (!broken_) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        broken_ = e.what();
      } catch (...) {
        broken_ = "an unknown exception";
      }
    }
    DrainStreams();
    work.Finish(nullptr, error);
  }

 private:
  Communicator& comm_;
  Device& device_;
  StagingOptions options_;
  std::vector<std::shared_ptr<void>> slots_;  // declared before the streams: outlives their copies
  std::unique_ptr<DeviceStream> out_, in_;
  std::vector<std::shared_ptr<DeviceEvent>> slot_free_;  // the operations' thread only
  std::optional<std::string> broken_;  // the first failure's message; the operations' thread only
  const std::shared_ptr<std::atomic<uint64_t>> progress_ =
      std::make_shared<std::atomic<uint64_t>>(0);
  std::atomic<uint64_t> submitted_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;        // guarded by mu_
  std::deque<std::shared_ptr<StagedWork>> works_;  // guarded by mu_, one per task
  bool stopping_ = false;                          // guarded by mu_
  std::thread thread_;
};

DeviceCollectives::DeviceCollectives(Communicator& comm, Device& device, StagingOptions options)
    : impl_(std::make_unique<Impl>(comm, device, options)) {}

DeviceCollectives::~DeviceCollectives() = default;

const StagingOptions& DeviceCollectives::options() const { return impl_->options(); }

void DeviceCollectives::Abort() { impl_->AbortComm(); }

std::shared_ptr<DeviceWork> DeviceCollectives::Allreduce(DeviceStream& caller, void* data,
                                                         size_t count, DataType dtype, ReduceOp op,
                                                         AllreduceOptions options) {
  CheckReduceOp(op, dtype, "device allreduce");
  Communicator& comm = impl_->comm();
  Stages stages;
  stages.host = [&comm, dtype, op, options](void* slot, size_t n) {
    return comm.Allreduce(slot, n, dtype, op, options);
  };
  return impl_->Submit(caller, "allreduce", data, count, dtype, std::move(stages));
}

std::shared_ptr<DeviceWork> DeviceCollectives::Broadcast(DeviceStream& caller, void* data,
                                                         size_t count, DataType dtype, int root) {
  Communicator& comm = impl_->comm();
  if (root < 0 || root >= comm.size())
    throw Error(ErrorCode::kInvalidArgument,
                "device broadcast: root " + std::to_string(root) + " is not a rank of this " +
                    std::to_string(comm.size()) + "-rank communicator");
  Stages stages;
  stages.copy_out = comm.rank() == root;  // the others' chunks are overwritten
  stages.copy_in = comm.rank() != root;   // the root's are unchanged
  stages.host = [&comm, dtype, root](void* slot, size_t n) {
    return comm.Broadcast(slot, n, dtype, root);
  };
  return impl_->Submit(caller, "broadcast", data, count, dtype, std::move(stages));
}

}  // namespace cdt
