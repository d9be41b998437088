#include "compress/error_feedback.h"

#include <cmath>
#include <string>

#include "cdt/error.h"
#include "compress/kernels.h"

namespace cdt::compress {

// Both passes run over the whole bucket on the compression thread (compress/kernels.h); x = g + e
// is kept in the residual buffer itself, so no third buffer is written.
void ErrorFeedback::Begin(Communicator& comm, float* grad, float* local, size_t n) {
  if (residual_.size() != n) residual_.assign(n, 0.0f);
  if (momentum_ > 0 && velocity_.size() != n) velocity_.assign(n, 0.0f);
  begun_ = {local, n, comm.rank(), 0.0};
  begun_.input_sq =
      momentum_ > 0 ? kernels::AddResidualWithMomentum(static_cast<float>(momentum_), grad,
                                                       velocity_.data(), residual_.data(), grad, n)
                    : kernels::AddResidual(grad, residual_.data(), grad, n);
  inner_->Begin(comm, grad, local, n);
}

size_t ErrorFeedback::End() {
  const size_t wire = inner_->End();
  const size_t n = begun_.n;
  const double e2 = kernels::SubtractSent(begun_.local, residual_.data(), n);
  // A finite input with a non-finite residual is the compressor's fault (int8 once turned chunks
  // with a subnormal scale into NaN, which then silenced those elements for the rest of the run):
  // stop rather than train on.
  if (std::isfinite(begun_.input_sq) && !std::isfinite(e2))
    throw Error(ErrorCode::kDiverged,
                "error feedback around '" + inner_->name() + "': a finite gradient of " +
                    std::to_string(n) + " elements left a non-finite residual (rank " +
                    std::to_string(begun_.rank) +
                    "): the compressor produced NaN or infinity; train with another --compress "
                    "and report it");
  residual_norm_ = std::sqrt(e2);
  input_norm_ = std::sqrt(begun_.input_sq);
  return wire;
}

std::vector<float> ErrorFeedback::GetState() const {
  std::vector<float> out = {static_cast<float>(residual_.size())};
  out.insert(out.end(), residual_.begin(), residual_.end());
  if (momentum_ > 0) {
    if (velocity_.size() == residual_.size())
      out.insert(out.end(), velocity_.begin(), velocity_.end());
    else
      out.resize(out.size() + residual_.size(), 0.0f);
  }
  std::vector<float> inner = inner_->GetState();
  out.insert(out.end(), inner.begin(), inner.end());
  return out;
}

std::string ErrorFeedback::SetState(const std::vector<float>& s) {
  if (s.empty()) return {};
  const size_t vectors = momentum_ > 0 ? 2 : 1;
  // s[0] is checked as a float first: a garbage count must not reach the cast.
  if (!(s[0] >= 0 && s[0] <= static_cast<float>(s.size())) ||
      1 + vectors * static_cast<size_t>(s[0]) > s.size())
    return "the error-feedback residual does not fit this bucket: it starts from zero";
  const auto n = static_cast<size_t>(s[0]);
  const auto at = [&](size_t i) { return s.begin() + static_cast<long>(i); };
  residual_.assign(at(1), at(1 + n));
  if (momentum_ > 0) velocity_.assign(at(1 + n), at(1 + 2 * n));
  return inner_->SetState(std::vector<float>(at(1 + vectors * n), s.end()));
}

}  // namespace cdt::compress
