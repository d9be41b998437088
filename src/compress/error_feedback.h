// Error feedback (EF14, Seide et al.; EF-SGD, Karimireddy et al. ICML'19) for any compressor:
// what compression dropped this step is added to the next step's gradient, so nothing is lost,
// only delayed:
//   x = g + e;  sent = compress(x);  e = x − local(sent)
// Mass is conserved: Σ_steps local(sent) + e = Σ_steps g (to float rounding; tested).
// The residual e is state: the trainer checkpoints it. Should the inner reduction throw (a failed
// collective), the residual is left holding x: the trainer then drops this compressor and
// restores its state from the last checkpoint.
//
// Momentum correction (Deep Gradient Compression, Lin et al., ICLR'18, §3.2): with momentum m > 0
// the wrapper keeps the momentum velocity itself and compresses that instead of the gradient,
//   u = m·u + g;  x = u + e;  sent = compress(x);  e = x − local(sent)
// and the optimizer then runs without momentum. Summed over steps, what is sent is exactly
// momentum SGD's update (linear in the ranks' gradients), only delayed where compression held
// it back; momentum applied after a sparse or sign compressor instead amplifies the delayed
// residual in bursts, which is what made random-k diverge and sign lose 1.7 points here.
// DGC also zeroes u where an element was sent ("momentum factor masking"); we do not: with an
// exact compressor it would turn momentum SGD into plain SGD.
#pragma once

#include <memory>
#include <vector>

#include "compress/compressor.h"

namespace cdt::compress {

class ErrorFeedback : public SplitCompressor {
 public:
  explicit ErrorFeedback(std::unique_ptr<Compressor> inner, double momentum = 0)
      : inner_(std::move(inner)), momentum_(momentum) {}
  std::string name() const override { return inner_->name(); }
  bool exact() const override { return inner_->exact(); }
  // Swaps the compressor and keeps the residual (the adaptive controller changes compressors;
  // what the old one dropped is still sent, by the new one).
  void set_inner(std::unique_ptr<Compressor> inner) { inner_ = std::move(inner); }
  Compressor& inner() { return *inner_; }
  // x = g + e, then the inner Begin; End: the inner End, then e = x − local.
  void Begin(Communicator& comm, float* grad, float* local, size_t n) override;
  size_t End() override;

  const std::vector<float>& residual() const { return residual_; }
  const std::vector<float>& velocity() const { return velocity_; }  // empty without momentum
  double momentum() const { return momentum_; }
  // ||e|| and ||x|| of the last call (the residual as a share of what was compressed).
  double residual_norm() const { return residual_norm_; }
  double input_norm() const { return input_norm_; }

  // n, the residual, the velocity (with momentum), then the inner compressor's state.
  std::vector<float> GetState() const override;
  std::string SetState(const std::vector<float>& state) override;
  // Drops the residual and the velocity (the next Begin starts them at zero), keeping the inner
  // compressor's state: what a rank that joins a group takes from another rank's state (PowerSGD's
  // Q and random-k's draw count are the same on every rank; a residual is one rank's own).
  void ForgetResidual() {
    residual_.clear();
    velocity_.clear();
  }

 private:
  std::unique_ptr<Compressor> inner_;
  double momentum_ = 0;
  std::vector<float> residual_;
  std::vector<float> velocity_;
  double residual_norm_ = 0, input_norm_ = 0;
  struct Begun {  // between Begin and End
    float* local = nullptr;
    size_t n = 0;
    int rank = 0;
    double input_sq = 0;  // ||x||²
  } begun_;
};

}  // namespace cdt::compress
