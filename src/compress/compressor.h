// Gradient compression: the Compressor contract (GRACE's split — a compressor owns the encoding
// and the collective that sums encoded gradients; error feedback is a wrapper, error_feedback.h;
// choosing compressors over time is the adaptive controller's job, adaptive_controller.h).
//
// Framework-free: compressors work on raw float32 buffers and a Communicator, so they are tested
// without libtorch and used by the trainer through its bucket hook (train/gradient_reducer.h).
//
// Wire bytes: the size of what this rank contributes per call (its encoded gradient), the
// measure GRACE and the PowerSGD paper report. Compressors whose encodings cannot be summed in
// transit (top-k, sign) exchange them with an allgather, so each rank *receives* world − 1 such
// payloads; their files say so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cdt/communicator.h"

namespace cdt::compress {

// One tensor inside a bucket: its first element and its matrix view (rows x cols; PyTorch's
// PowerSGD views a tensor as shape[0] x rest; a vector is n x 1).
struct TensorView {
  size_t offset = 0;
  size_t rows = 0;
  size_t cols = 1;
  size_t numel() const { return rows * cols; }
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual std::string name() const = 0;
  // True for the plain float32 allreduce ("none"): exact, nothing to feed back.
  virtual bool exact() const { return false; }

  // Replaces `grad` (n floats) with the lossy sum over all ranks of `comm`. Blocking: submits
  // collectives and waits, so run it off the training thread. `local` (n floats) receives this
  // rank's contribution to that sum as decoded (error feedback keeps grad − local); the local
  // contributions of all ranks add up to the result (up to the rounding of sums carried in
  // 16-bit floats). Every rank calls it with the same n.
  // Returns the wire bytes of this call.
  virtual size_t Reduce(Communicator& comm, float* grad, float* local, size_t n) = 0;

  // Reduce in two halves, so that one channel keeps its link busy from bucket to bucket
  // (PowerSGD's P and Q pipelined across buckets; DDP's communication hooks chain futures for
  // the same reason). Begin runs the reduction up to and including the submission of its last
  // collective and returns without waiting for it; End waits for it, decodes into `grad` and
  // `local` and returns the wire bytes. Between a Begin and its End the caller may Begin other
  // compressors on the same communicator: their collectives queue behind this one's, so the
  // collectives keep the order of the Begin calls on every rank. End submits nothing; each Begin
  // needs its End before the next Begin of the same compressor, and the buffers stay untouched
  // in between. Begin then End is Reduce. Every compressor here is split (SplitCompressor); the
  // default, which runs all of Reduce in Begin, is for one that is not.
  virtual void Begin(Communicator& comm, float* grad, float* local, size_t n) {
    begun_wire_ = Reduce(comm, grad, local, n);
  }
  virtual size_t End() { return begun_wire_; }

  // State that must survive a checkpoint (error-feedback residuals, PowerSGD's Q). A state that
  // does not fit (another rank or layout) is never loaded by offsets: that part starts afresh,
  // and SetState returns what it left out, in words for a log line (empty: it used all of it).
  virtual std::vector<float> GetState() const { return {}; }
  virtual std::string SetState(const std::vector<float>& /*state*/) { return {}; }

 private:
  size_t begun_wire_ = 0;  // the default Begin's result, for its End
};

// A compressor written as the two halves: Reduce is its Begin, then its End.
class SplitCompressor : public Compressor {
 public:
  size_t Reduce(Communicator& comm, float* grad, float* local, size_t n) final {
    Begin(comm, grad, local, n);
    return End();
  }
  void Begin(Communicator& comm, float* grad, float* local, size_t n) override = 0;
  size_t End() override = 0;
};

struct CompressorOptions {
  double ratio = 0.01;  // top-k / random-k: share of elements sent
  // top-k / random-k: the type the kept values travel in. float16 or bfloat16 halve the values'
  // bytes (DGC and GRACE quantise the kept values too); error feedback keeps the rounding.
  DataType sparse_values = DataType::kFloat32;
  int powersgd_rank = 2;  // PowerSGD: rank of the approximation
  // PowerSGD: a bucket whose matrices would save fewer bytes than this goes uncompressed, in one
  // allreduce instead of two (a round trip costs more than a few KiB save on any link).
  size_t powersgd_min_saved_bytes = 16 << 10;
  size_t int8_chunk = 512;     // int8: elements per scale
  uint64_t seed = 1;           // random draws shared by all ranks (random-k, PowerSGD's first Q)
  bool error_feedback = true;  // wrap lossy compressors in ErrorFeedback
};

// The wire bytes of one PowerSGD reduction of a bucket with these tensors at `rank` (what its
// Reduce returns; the adaptive controller predicts communication from it).
size_t PowerSgdWireBytes(const std::vector<TensorView>& tensors, int rank, size_t min_saved_bytes);

}  // namespace cdt::compress
