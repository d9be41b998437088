// Error feedback (EF14, Seide et al.; EF-SGD, Karimireddy et al. ICML'19) for any compressor:
// what compression dropped this step is added to the next step's gradient, so nothing is lost,
// only delayed:
//   x = g + e;  sent = compress(x);  e = x − local(sent)
// Mass is conserved: Σ_steps local(sent) + e = Σ_steps g (to float rounding; tested).
// The residual e is state: the trainer checkpoints it.
#pragma once

#include <memory>
#include <vector>

#include "compress/compressor.h"

namespace cdt::compress {

class ErrorFeedback : public Compressor {
 public:
  explicit ErrorFeedback(std::unique_ptr<Compressor> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  // Swaps the compressor and keeps the residual (the adaptive controller changes compressors;
  // what the old one dropped is still sent, by the new one).
  void set_inner(std::unique_ptr<Compressor> inner) { inner_ = std::move(inner); }
  Compressor& inner() { return *inner_; }
  size_t Reduce(Communicator& comm, float* grad, float* local, size_t n) override;

  const std::vector<float>& residual() const { return residual_; }
  // ||e|| and ||x|| of the last call (the residual as a share of what was compressed).
  double residual_norm() const { return residual_norm_; }
  double input_norm() const { return input_norm_; }

  std::vector<float> GetState() const override;  // residual, then the inner compressor's state
  void SetState(const std::vector<float>& state) override;

 private:
  std::unique_ptr<Compressor> inner_;
  std::vector<float> residual_;
  std::vector<float> input_;
  double residual_norm_ = 0, input_norm_ = 0;
};

}  // namespace cdt::compress
