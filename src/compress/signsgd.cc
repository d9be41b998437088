// "signsgd": EF-SignSGD (Karimireddy et al., ICML'19): each rank sends the signs of its
// gradient, one bit per element, and one scale, the mean magnitude ||g||_1 / n, so that its
// contribution is scale × sign(g); error feedback (required for convergence, the paper's point)
// keeps g minus that. Signs from different ranks cannot be summed in transit: bits and scales
// are allgathered and every rank adds up the contributions. Wire: ceil(n / 8) + 4 bytes per rank;
// each rank receives world − 1 such payloads.
#include <cmath>
#include <cstring>
#include <vector>

#include "compress/compressors.h"

namespace cdt::compress {
namespace {

class SignSgd : public Compressor {
 public:
  std::string name() const override { return "signsgd"; }

  size_t Reduce(Communicator& comm, float* grad, float* local, size_t n) override {
    if (n == 0) return 0;
    const size_t bytes = (n + 7) / 8, world = static_cast<size_t>(comm.size());
    // Payload: 4 bytes of scale, then the bits (1 = negative), padded to whole int8s.
    mine_.assign(4 + bytes, 0);
    double l1 = 0;
    for (size_t i = 0; i < n; ++i) l1 += std::fabs(grad[i]);
    const float scale = static_cast<float>(l1 / static_cast<double>(n));
    std::memcpy(mine_.data(), &scale, 4);
    for (size_t i = 0; i < n; ++i) {
      const bool negative = std::signbit(grad[i]);
      if (negative) mine_[4 + i / 8] = static_cast<int8_t>(mine_[4 + i / 8] | (1 << (i % 8)));
      local[i] = negative ? -scale : scale;
    }
    all_.resize(world * mine_.size());
    comm.Allgather(mine_.data(), all_.data(), mine_.size(), DataType::kInt8)->Wait();
    std::fill(grad, grad + n, 0.0f);
    for (size_t r = 0; r < world; ++r) {
      const int8_t* p = all_.data() + r * mine_.size();
      float s;
      std::memcpy(&s, p, 4);
      for (size_t i = 0; i < n; ++i) grad[i] += (p[4 + i / 8] >> (i % 8)) & 1 ? -s : s;
    }
    return 4 + bytes;
  }

 private:
  std::vector<int8_t> mine_, all_;
};

}  // namespace

std::unique_ptr<Compressor> MakeSignSgd() { return std::make_unique<SignSgd>(); }

}  // namespace cdt::compress
