#include "compress/error_feedback.h"

#include <cmath>

namespace cdt::compress {

size_t ErrorFeedback::Reduce(Communicator& comm, float* grad, float* local, size_t n) {
  if (residual_.size() != n) residual_.assign(n, 0.0f);
  input_.resize(n);
  double in2 = 0;
  for (size_t i = 0; i < n; ++i) {
    grad[i] += residual_[i];
    input_[i] = grad[i];
    in2 += static_cast<double>(grad[i]) * grad[i];
  }
  const size_t wire = inner_->Reduce(comm, grad, local, n);
  double e2 = 0;
  for (size_t i = 0; i < n; ++i) {
    residual_[i] = input_[i] - local[i];
    e2 += static_cast<double>(residual_[i]) * residual_[i];
  }
  residual_norm_ = std::sqrt(e2);
  input_norm_ = std::sqrt(in2);
  return wire;
}

std::vector<float> ErrorFeedback::GetState() const {
  std::vector<float> out = {static_cast<float>(residual_.size())};
  out.insert(out.end(), residual_.begin(), residual_.end());
  std::vector<float> inner = inner_->GetState();
  out.insert(out.end(), inner.begin(), inner.end());
  return out;
}

void ErrorFeedback::SetState(const std::vector<float>& s) {
  if (s.empty()) return;
  const auto n = static_cast<size_t>(s[0]);
  if (1 + n > s.size()) return;  // not ours: keep a zero residual
  residual_.assign(s.begin() + 1, s.begin() + 1 + static_cast<long>(n));
  inner_->SetState(std::vector<float>(s.begin() + 1 + static_cast<long>(n), s.end()));
}

}  // namespace cdt::compress
