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
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "compress/compressor.h"
#include "compress/method.h"
#include "python/process_group.h"
#include "python/serial_queue.h"

namespace cdt::python {

class CompressionHook {
 public:
  // Throws cdt::Error(kInvalidArgument) for options the method cannot take.
  CompressionHook(c10::intrusive_ptr<::c10d::ProcessGroup> pg, compress::Method method,
                  compress::CompressorOptions options);
  ~CompressionHook();

  // Reduces `buffer` (float32, contiguous) in place to the ranks' mean, later, then calls `done`
  // with null, or with the error. `shapes`: (rows, cols) of the bucket's tensors in order.
  void Reduce(int64_t bucket, at::Tensor buffer,
              const std::vector<std::pair<int64_t, int64_t>>& shapes,
              std::function<void(std::exception_ptr)> done);

  // Every bucket's compressor state (error-feedback residuals), by bucket index; and back (what a
  // compressor could not use, in words; empty: all of it).
  std::map<int64_t, std::vector<float>> State();
  std::string SetState(const std::map<int64_t, std::vector<float>>& state);

 private:
  compress::Compressor& CompressorOf(int64_t bucket,
                                     const std::vector<std::pair<int64_t, int64_t>>& shapes);

  c10::intrusive_ptr<::c10d::ProcessGroup> pg_;
  std::unique_ptr<Communicator> adapted_;  // another backend's group as a Communicator
  Communicator* comm_;                     // the cdt group's communicator, or adapted_
  const compress::Method method_;
  const compress::CompressorOptions options_;
  std::mutex mu_;  // compressors_, between Reduce's thread and State/SetState
  std::map<int64_t, std::unique_ptr<compress::Compressor>> compressors_;
  std::map<int64_t, std::vector<float>> restored_;  // SetState before a bucket's first use
  std::vector<float> local_;                         // the queue's scratch
  std::unique_ptr<SerialQueue> queue_;               // drained first (DrainWithoutGil)
};

}  // namespace cdt::python
