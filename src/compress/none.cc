// "none": one float32 allreduce, exact. The baseline every compressor is measured against.
#include <algorithm>

#include "compress/compressors.h"

namespace cdt::compress {
namespace {

class PlainAllreduce : public SplitCompressor {
 public:
  std::string name() const override { return "none"; }
  bool exact() const override { return true; }
  void Begin(Communicator& comm, float* grad, float* local, size_t n) override {
    std::copy(grad, grad + n, local);
    n_ = n;
    if (n > 0) work_ = comm.Allreduce(grad, n, DataType::kFloat32, ReduceOp::kSum);
  }
  size_t End() override {
    if (auto w = std::move(work_)) w->Wait();
    return 4 * n_;
  }
  ~PlainAllreduce() override { WaitIgnoringError(work_); }

 private:
  size_t n_ = 0;
  std::shared_ptr<Work> work_;  // between Begin and End
};

}  // namespace

std::unique_ptr<Compressor> MakePlainAllreduce() { return std::make_unique<PlainAllreduce>(); }

}  // namespace cdt::compress
