// "none": one float32 allreduce, exact. The baseline every compressor is measured against.
#include <algorithm>

#include "compress/compressors.h"

namespace cdt::compress {
namespace {

class PlainAllreduce : public Compressor {
 public:
  std::string name() const override { return "none"; }
  size_t Reduce(Communicator& comm, float* grad, float* local, size_t n) override {
    std::copy(grad, grad + n, local);
    if (n > 0) comm.Allreduce(grad, n, DataType::kFloat32, ReduceOp::kSum)->Wait();
    return 4 * n;
  }
};

}  // namespace

std::unique_ptr<Compressor> MakePlainAllreduce() { return std::make_unique<PlainAllreduce>(); }

}  // namespace cdt::compress
