// "fp16" / "bf16": the gradient travels as 16-bit floats; every addition along the way is done
// in float32 and rounded back (the communicator's f16/bf16 reduction, src/comm/reduce.cc).
// PyTorch's fp16_compress_hook does the same cast (it divides first; we sum, as the trainer's
// loss is already divided by the global batch). Half the bytes; float16's range (6e-8 .. 65504)
// covers gradients of a loss divided by the batch, bfloat16 has float32's range and 8 bits of
// mantissa.
#include <vector>

#include "compress/compressors.h"

namespace cdt::compress {
namespace {

class Cast : public SplitCompressor {
 public:
  explicit Cast(DataType wire) : wire_(wire) {}
  std::string name() const override { return wire_ == DataType::kFloat16 ? "fp16" : "bf16"; }

  void Begin(Communicator& comm, float* grad, float* local, size_t n) override {
    buf_.resize(n);
    EncodeWireValues(wire_, grad, buf_.data(), n);
    DecodeWireValues(wire_, buf_.data(), local, n);
    grad_ = grad;
    if (n > 0) work_ = comm.Allreduce(buf_.data(), n, wire_, ReduceOp::kSum);
  }
  size_t End() override {
    if (auto w = std::move(work_)) w->Wait();
    DecodeWireValues(wire_, buf_.data(), grad_, buf_.size());
    return 2 * buf_.size();
  }
  ~Cast() override { WaitIgnoringError(work_); }

 private:
  DataType wire_;
  std::vector<uint16_t> buf_;
  float* grad_ = nullptr;       // between Begin and End
  std::shared_ptr<Work> work_;  // between Begin and End
};

}  // namespace

std::unique_ptr<Compressor> MakeCast(DataType wire) { return std::make_unique<Cast>(wire); }

}  // namespace cdt::compress
