// C10dCommunicator: any torch.distributed process group (Gloo's, MPI's) as the engine's
// Communicator, so that the engine's compressors run on it (cann_dist.hooks.compress on "gloo").
// Every operation is submitted and waited for before it returns: a compressor may submit two
// collectives before waiting for the first, and Gloo's process group runs its queue on two
// threads that can take them in a different order on different ranks — which is how PyTorch's own
// powerSGD_hook aborts on Gloo here ("op.preamble.length <= op.nbytes"; bench/peers/
// ddp_baseline.py). One at a time, every rank runs them in the same order.
//
// What Gloo lacks is composed: reduce-scatter as an allreduce and a copy, an allgather of unequal
// counts as one of the largest count, padded. AVG is a SUM divided here.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cdt/communicator.h"

namespace cdt::python {

class C10dCommunicator : public Communicator {
 public:
  explicit C10dCommunicator(c10::intrusive_ptr<::c10d::ProcessGroup> pg);

  int rank() const override { return pg_->getRank(); }
  int size() const override { return pg_->getSize(); }
  uint64_t generation() const override { return 0; }
  const NodeLayout& layout() const override { return layout_; }
  std::string backend_name() const override { return "torch.distributed:" + pg_->getBackendName(); }

  std::shared_ptr<Work> Allreduce(void* data, size_t count, DataType dtype, ReduceOp op,
                                  AllreduceOptions options = {}) override;
  std::shared_ptr<Work> Broadcast(void* data, size_t count, DataType dtype, int root) override;
  std::shared_ptr<Work> Allgatherv(const void* input, void* output,
                                   const std::vector<size_t>& counts, DataType dtype) override;
  std::shared_ptr<Work> ReduceScatter(const void* input, void* output,
                                      const std::vector<size_t>& counts, DataType dtype,
                                      ReduceOp op) override;
  std::shared_ptr<Work> Reduce(void* data, size_t count, DataType dtype, ReduceOp op,
                               int root) override;
  std::shared_ptr<Work> Gatherv(const void* input, void* output, const std::vector<size_t>& counts,
                                DataType dtype, int root) override;
  std::shared_ptr<Work> Scatterv(const void* input, void* output, const std::vector<size_t>& counts,
                                 DataType dtype, int root) override;
  std::shared_ptr<Work> Alltoallv(const void* input, const std::vector<size_t>& send_counts,
                                  void* output, const std::vector<size_t>& recv_counts,
                                  DataType dtype) override;
  std::shared_ptr<Work> Barrier() override;
  std::shared_ptr<Work> Send(const void* data, size_t bytes, int dst) override;
  std::shared_ptr<Work> Recv(void* data, size_t bytes, int src) override;

  void SetAllreduceSelector(std::shared_ptr<AllreduceSelector>) override {}
  AllreduceAlgorithm ResolveAllreduce(size_t, DataType) const override {
    return AllreduceAlgorithm::kAuto;
  }
  void Abort() override {}

 private:
  c10::intrusive_ptr<::c10d::ProcessGroup> pg_;
  NodeLayout layout_;
};

}  // namespace cdt::python
