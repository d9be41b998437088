// CompressionHook: the engine's gradient compressors (src/compress) with error feedback as a DDP
// communication hook (python/cann_dist/hooks.py; docs/python.md). PyTorch's own hooks
// (fp16_compress_hook, powerSGD_hook) are the anchors; this one runs every compressor of
// `train --compress` on the "cdt" backend's communicator, or on any other process group (Gloo's)
// through C10dCommunicator.
//
// DDP hands each bucket's flat float32 gradient; the bucket's compressor (made at its first use
// from the bucket's tensor shapes, PowerSGD's matrices among them) reduces it on one thread of its
// own, in bucket order — the order DDP launches buckets on every rank — and the result, averaged
// over the ranks, goes back through `done`. The residual of each bucket (what compression left out,
// sent in later steps) can be read and restored with the model's state.
//
// Adaptive (`compress("adaptive")`): the AdaptiveController of `train --compress adaptive`
// (compress/adaptive_controller.h) chooses each bucket's compressor (uncompressed, or PowerSGD at
// a rank) every `interval` steps, from the phase of training and from how communication-bound
// the job is, measured here: a step starts at bucket 0 (DDP launches buckets in index order), its
// time runs to the next one; the exposed communication is the last bucket's time from its launch
// to its completion (the backward is over then), the rest is compute; the communication is the
// buckets' time in the compressors; the norms are the local gradients'. Steps 0 and 1 (DDP
// rebuilds its buckets after the first) go uncompressed and time the plain allreduce; every
// decision sums the interval's figures over the ranks (one small allreduce on the queue, at the
// same bucket on every rank), so every rank decides the same. A bucket whose compressor changes
// starts a new residual.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compress/adaptive_controller.h"
#include "compress/compressor.h"
#include "compress/method.h"
#include "python/process_group.h"
#include "python/serial_queue.h"

namespace cdt::python {

class CompressionHook {
 public:
  // Throws cdt::Error(kInvalidArgument) for options the method cannot take. `adaptive`: choose
  // per bucket and interval (method is then ignored).
  CompressionHook(c10::intrusive_ptr<::c10d::ProcessGroup> pg, compress::Method method,
                  compress::CompressorOptions options,
                  std::optional<compress::AdaptiveOptions> adaptive = std::nullopt);
  ~CompressionHook();

  // Reduces `buffer` (float32, contiguous) in place to the ranks' mean, later, then calls `done`
  // with null, or with the error. `shapes`: (rows, cols) of the bucket's tensors in order.
  void Reduce(int64_t bucket, at::Tensor buffer,
              const std::vector<std::pair<int64_t, int64_t>>& shapes,
              std::function<void(std::exception_ptr)> done);

  // Every bucket's compressor state (error-feedback residuals), by bucket index; and back (what a
  // compressor could not use, in words; empty: all of it).
  // With `residuals` false, only what every rank shares is taken (error-feedback residuals
  // start from zero: compress::ErrorFeedback::ForgetResidual): a rank joining an elastic group
  // takes another rank's state so.
  std::map<int64_t, std::vector<float>> State();
  std::string SetState(const std::map<int64_t, std::vector<float>>& state, bool residuals = true);

  // Adaptive: each decision taken so far — (first step, phase, reason, per bucket "none" or
  // "powersgd:R").
  struct DecisionRecord {
    int64_t from_step = 0;
    std::string phase, reason;
    std::vector<std::string> buckets;
  };
  std::vector<DecisionRecord> Decisions();

 private:
  // compress::ErrorFeedback::ForgetResidual where `c` keeps one.
  static void ForgetResidual(compress::Compressor& c);
  // Adaptive, on the queue: the step's and interval's bookkeeping before bucket `bucket` is
  // reduced (a decision is due at bucket 0 of an interval's first step), and after.
  void BeforeBucket(int64_t bucket, double launched_s);
  void AfterBucket(int64_t bucket, double launched_s, double started_s, size_t n, size_t wire);
  void Decide();
  void Apply(const compress::Decision& d);

  compress::Compressor& CompressorOf(int64_t bucket,
                                     const std::vector<std::pair<int64_t, int64_t>>& shapes);

  c10::intrusive_ptr<::c10d::ProcessGroup> pg_;
  std::unique_ptr<Communicator> adapted_;  // another backend's group as a Communicator
  Communicator* comm_;                     // the cdt group's communicator, or adapted_
  const compress::Method method_;
  const compress::CompressorOptions options_;
  std::mutex mu_;  // compressors_, between Reduce's thread and State/SetState
  std::map<int64_t, std::unique_ptr<compress::Compressor>> compressors_;
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> shapes_;  // each compressor's
  // Adaptive (null otherwise): the controller and what it is fed, touched on the queue only
  // (choices_ and decisions_ under mu_).
  std::unique_ptr<compress::AdaptiveController> controller_;
  std::optional<compress::AdaptiveOptions> adaptive_;
  std::vector<compress::BucketChoice> choices_;  // in force; empty = uncompressed
  std::vector<DecisionRecord> decisions_;
  int64_t step_ = -1, buckets_seen_ = 0;
  double step_start_s_ = 0, last_launch_s_ = 0, last_done_s_ = 0, step0_comm_s_ = 0;
  compress::IntervalObservation interval_;
  std::map<int64_t, std::vector<float>> restored_;  // SetState before a bucket's first use
  std::map<int64_t, bool> restored_residuals_;      // ... and whether its residual is taken
  std::vector<float> local_;                         // the queue's scratch
  std::unique_ptr<SerialQueue> queue_;               // drained first (DrainWithoutGil)
};

}  // namespace cdt::python
