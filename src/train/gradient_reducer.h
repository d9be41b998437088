// GradientReducer: averages gradients across ranks while backward still runs (DDP's Reducer).
//
// Parameters are grouped into buckets of about `bucket_bytes` in reverse registration order — the
// order backward produces their gradients. A hook on each parameter copies its gradient into its
// bucket's flat buffer as soon as autograd has it; a full bucket launches its asynchronous
// allreduce at once, so communication overlaps the rest of backward. Buckets launch strictly in
// index order on every rank (a bucket that fills early waits for its predecessors), so all ranks
// issue the same collectives in the same order whatever order their hooks fire in.
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
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

#include "cdt/communicator.h"

namespace cdt::train {

// The compression hook point: turns one bucket's flat f32 gradient into the summed gradient,
// asynchronously. Identity = one allreduce; the compression issue plugs compressors in here.
using BucketHook = std::function<std::shared_ptr<Work>(Communicator&, torch::Tensor& flat)>;
BucketHook AllreduceBucketHook();

struct ReducerStats {
  int buckets = 0;
  double bytes_fp32 = 0;     // gradient bytes reduced (all steps)
  double bytes_wire = 0;     // bytes handed to the network (= fp32 without compression)
  double comm_seconds = 0;   // sum of the buckets' run time on the communicator thread
  double wait_seconds = 0;   // training thread blocked in FinishBackward (exposed communication)
};

class GradientReducer {
 public:
  GradientReducer(Communicator& comm, std::vector<torch::Tensor> params, size_t bucket_bytes,
                  BucketHook hook = AllreduceBucketHook());
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before each backward: sync = false accumulates locally (a micro-batch before the last).
  void PrepareForBackward(bool sync);
  // After a syncing backward: launches what is left, waits for every bucket, writes the summed
  // gradients into .grad. Returns the seconds it blocked.
  double FinishBackward();

  const ReducerStats& stats() const { return stats_; }
  // Bucket sizes in elements, in launch order.
  std::vector<size_t> bucket_elements() const;

 private:
  struct Slot {
    int bucket = 0;
    int64_t offset = 0;  // in the bucket's flat buffer
  };
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    torch::Tensor flat;          // f32, contiguous
    size_t pending = 0;          // gradients still to arrive this backward
    std::shared_ptr<Work> work;  // set once launched
  };

  void OnGradient(size_t index, const torch::Tensor& grad);
  void LaunchReady();

  Communicator& comm_;
  std::vector<torch::Tensor> params_;
  BucketHook hook_;
  std::vector<Slot> slots_;
  std::vector<std::pair<size_t, unsigned>> hooks_;  // (parameter, hook handle), removed at the end
  std::vector<Bucket> buckets_;
  std::vector<bool> ready_;     // per parameter, this backward
  size_t next_launch_ = 0;
  bool sync_ = true;
  bool armed_ = false;          // between PrepareForBackward(true) and FinishBackward
  ReducerStats stats_;
};

}  // namespace cdt::train
