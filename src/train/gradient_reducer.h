// GradientReducer: averages gradients across ranks while backward still runs (DDP's Reducer).
//
// Parameters are grouped into buckets of about `bucket_bytes` in reverse registration order — the
// order backward produces their gradients. A hook on each parameter copies its gradient into its
// bucket's flat buffer as soon as autograd has it; a full bucket launches its asynchronous
// allreduce at once, so communication overlaps the rest of backward. Buckets launch strictly in
// index order on every rank (a bucket that fills early waits for its predecessors), so all ranks
// issue the same collectives in the same order whatever order their hooks fire in. That order is
// bucket index order unless SetLaunchOrder gives another one — the same on every rank — for the
// next backward (the trainer derives it from the order forward used the parameters in).
//
// Gradients are summed; the trainer divides the loss by the *global* batch, so the sum is the
// exact gradient of the global mean loss even when ranks have unequal batches.
//
// Parameters that get no gradient in a backward (an MoE expert no token chose) are filled with
// zeros by FinishBackward, which then launches what is left — correct, without their overlap.
//
// Micro-batches: PrepareForBackward(false) makes hooks do nothing, so gradients accumulate locally
// in .grad (DDP's no_sync); the next PrepareForBackward(true) backward adds the accumulated .grad
// into the bucket.
//
// Two channels (optional): buckets that start past the first three quarters of the gradient bytes
// in index order — the layers nearest the input, which the next forward needs first — run on a
// second communicator, so that they are not queued behind the big late-used buckets
// (ByteScheduler's priorities, SOSP'19, with two levels). That region starts a bucket of its own
// and is cut into buckets of an eighth of the size (a small parameter joins the next one), so that
// the input layer travels alone and the layers before it are reduced while its backward still runs.
// Each channel keeps its own submission order, identical on every rank; TCP shares the link between
// them. Collecting results bucket by bucket (LaunchRemaining, then Collect per bucket) lets the
// trainer apply each bucket's update just before the next forward uses it
// (train/update_scheduler.h).
#pragma once

#include <torch/torch.h>

#include <chrono>

#include <functional>
#include <memory>
#include <vector>

#include "cdt/communicator.h"
#include "compress/compressor.h"
#include "compress/error_feedback.h"
#include "train/task_runner.h"
#include "train/timeline.h"

namespace cdt::train {

// The compression hook point: makes bucket b's compressor from the bucket's tensors. Null = no
// compression (one asynchronous allreduce per bucket, no extra thread). With a factory, each
// bucket's compressor is wrapped in error feedback (unless `error_feedback` is false; with
// `ef_momentum` > 0 the wrapper keeps the momentum, compress/error_feedback.h) and runs on a
// TaskRunner per channel. It Begins the buckets in launch order and Ends each when nothing else
// is queued, so that a bucket ready by then submits its collectives behind the previous one's
// before that one is waited for and decoded (PowerSGD's P and Q pipelined across buckets,
// compress/compressor.h).
using CompressorFactory = std::function<std::unique_ptr<compress::Compressor>(
    size_t bucket, const std::vector<compress::TensorView>& tensors)>;

struct ReducerStats {
  int buckets = 0;
  double bytes_fp32 = 0;  // gradient bytes reduced (all steps)
  double bytes_wire = 0;  // bytes handed to the network (= fp32 without compression)
  // Error feedback: squared norms of the residual left and of what was compressed, summed over
  // buckets and steps (collected buckets only).
  double residual_sq = 0, compressed_sq = 0;
  double comm_seconds = 0;  // sum of the buckets' run time on the communicator thread
  double wait_seconds = 0;  // training thread blocked on buckets (exposed communication)
  std::vector<double> bucket_comm_seconds;  // per bucket, totals of the two above
  std::vector<double> bucket_wait_seconds;
  // Bucket reductions that took the plain allreduce path although compression was on (their
  // compressor was "none" and its residual already sent; see PrepareForBackward).
  int64_t direct_reductions = 0;
};

class GradientReducer {
 public:
  // `priority` (may be null: one channel) carries the early-layer buckets; it must connect the
  // same ranks as `comm`.
  GradientReducer(Communicator& comm, Communicator* priority, std::vector<torch::Tensor> params,
                  size_t bucket_bytes, CompressorFactory compression = nullptr,
                  bool error_feedback = true, double ef_momentum = 0);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before each backward: sync = false accumulates locally (a micro-batch before the last). A
  // syncing backward needs every result of the previous one collected (throws otherwise: its
  // buffers are about to be reused).
  //
  // With compression, a channel whose every bucket has run "none" at least once in a row (so the
  // error-feedback residual was sent and is exactly zero on every rank) goes *direct* for this
  // backward: its buckets are allreduced from the training thread like uncompressed ones, and
  // SubmitInOrder submits at once, skipping the compression thread and error feedback's passes —
  // what the adaptive controller's "none" must cost where compression does not pay. The decision
  // depends only on the compressor names every rank applies alike, so all ranks agree. Going
  // direct, the channel's runner is drained first, so nothing it still holds can be submitted
  // after a direct collective on one rank and before it on another. Not with momentum correction
  // (the wrapper keeps the velocity).
  void PrepareForBackward(bool sync);
  // The order the buckets of the next syncing backward launch in: a permutation of the bucket
  // indices, identical on every rank (otherwise ranks would sum different buckets). Between
  // backwards only; kept until changed.
  void SetLaunchOrder(std::vector<size_t> order);
  const std::vector<size_t>& launch_order() const { return launch_order_; }
  // After a syncing backward: launches what is left (unused parameters count as zero) and returns
  // at once.
  void LaunchRemaining();
  // Waits for bucket `b` and writes its summed gradients into its parameters' .grad. Once per
  // backward; later calls return 0 at once. Returns the seconds it blocked.
  double Collect(size_t b);
  // LaunchRemaining, then Collect every bucket. Returns the seconds it blocked.
  double FinishBackward();

  const ReducerStats& stats() const { return stats_; }
  // Where Collect draws each bucket's collective and the wait for it (null: nowhere).
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  Timeline* timeline() const { return timeline_; }
  size_t num_buckets() const { return buckets_.size(); }
  // The bucket holding parameter `index` (an index into the constructor's `params`).
  size_t bucket_of(size_t index) const { return static_cast<size_t>(slots_[index].bucket); }
  const std::vector<size_t>& bucket_params(size_t b) const { return buckets_[b].params; }
  // Whether bucket `b` still has a result not yet collected.
  bool outstanding(size_t b) const { return buckets_[b].work && !buckets_[b].collected; }
  // Bucket sizes in elements, in launch order; and which run on the priority channel.
  std::vector<size_t> bucket_elements() const;
  std::vector<bool> bucket_priority() const;

  // Runs a collective in the submission order of a channel (the priority one when asked and
  // present): `op` submits on the given communicator and returns its Work. With compression, a
  // channel's collectives are submitted by its runner thread — another thread submitting at the
  // same time could interleave differently on different ranks — so `op` then runs as a task
  // there; otherwise it is submitted at once.
  std::shared_ptr<Work> SubmitInOrder(
      bool priority_channel, const std::function<std::shared_ptr<Work>(Communicator&)>& op);

  // Compression (only with a factory). Between steps: swap bucket b's compressor, keeping its
  // error-feedback residual; its name; the bucket's tensors.
  bool compressing() const { return static_cast<bool>(factory_); }
  void SetCompressor(size_t b, std::unique_ptr<compress::Compressor> c);
  std::string compressor_name(size_t b) const;
  std::vector<compress::TensorView> bucket_tensors(size_t b) const;
  // Norm of this rank's local gradient in bucket b at its last launch (before error feedback).
  double gradient_norm(size_t b) const { return buckets_.at(b).grad_norm; }
  // Per bucket: the compressor's state (residual, PowerSGD's Q ...), for checkpoints.
  // SetCompressorStates returns what the compressors left out (Compressor::SetState), one
  // "buckets 0, 2: ..." clause per distinct reason, joined by "; " (empty: all restored).
  std::vector<std::vector<float>> CompressorStates() const;
  std::string SetCompressorStates(const std::vector<std::vector<float>>& states);

 private:
  struct Slot {
    int bucket = 0;
    int64_t offset = 0;  // in the bucket's flat buffer
  };
  struct Bucket {
    std::vector<size_t> params;   // indices into params_
    torch::Tensor flat;           // f32, contiguous
    size_t pending = 0;           // gradients still to arrive this backward
    bool priority = false;        // runs on the priority channel
    std::shared_ptr<Work> work;   // set once launched
    std::shared_ptr<Work> begun;  // compressed: its Begin (work is then its End)
    bool collected = false;       // its result was written into .grad
    std::unique_ptr<compress::Compressor> compressor;  // null without compression
    std::vector<float> local;  // the compressor's scratch: this rank's contribution
    size_t wire = 0;           // bytes the last reduction handed over (set by its task)
    int64_t plain_runs = 0;    // reductions in a row with the "none" compressor (rank-independent)
    bool direct = false;       // this backward: plain allreduce, no compression thread
    double grad_norm = 0;      // of the local gradient at launch
    std::chrono::steady_clock::time_point ready, launched;  // this backward (timeline)
  };

  void OnGradient(size_t index, const torch::Tensor& grad);
  void LaunchReady();
  // When a collected bucket's reduction ran: compressed, from its Begin's start to its End.
  static Work::Interval RunInterval(const Bucket& b);

  Communicator& comm_;
  Communicator* priority_;
  std::vector<torch::Tensor> params_;
  CompressorFactory factory_;
  bool error_feedback_ = true;
  double ef_momentum_ = 0;
  std::unique_ptr<TaskRunner> runner_, priority_runner_;  // with compression only
  bool direct_[2] = {false, false};  // per channel (0 bulk, 1 priority), see PrepareForBackward
  std::vector<Slot> slots_;
  std::vector<std::pair<size_t, unsigned>> hooks_;  // (parameter, hook handle), removed at the end
  std::vector<Bucket> buckets_;
  std::vector<bool> ready_;           // per parameter, this backward
  std::vector<size_t> launch_order_;  // bucket indices
  size_t next_launch_ = 0;            // position in launch_order_
  bool sync_ = true;
  bool armed_ = false;  // between PrepareForBackward(true) and LaunchRemaining
  ReducerStats stats_;
  Timeline* timeline_ = nullptr;
};

}  // namespace cdt::train
