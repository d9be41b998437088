#include "python/comm_hook.h"

#include <c10/util/Exception.h>

#include <chrono>
#include <cmath>

#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "python/c10d_communicator.h"

namespace cdt::python {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Steps 0 and 1 go uncompressed (DDP rebuilds its buckets after step 0); the controller's first
// choice is in force from this step on.
constexpr int64_t kFirstAdaptiveStep = 2;

}  // namespace

CompressionHook::CompressionHook(c10::intrusive_ptr<::c10d::ProcessGroup> pg,
                                 compress::Method method, compress::CompressorOptions options,
                                 std::optional<compress::AdaptiveOptions> adaptive)
    : pg_(std::move(pg)),
      method_(adaptive ? compress::Method::kNone : method),
      options_(options),
      adaptive_(adaptive),
      queue_(std::make_unique<SerialQueue>()) {
  if (auto* cdt = CdtBackendOf(pg_)) {
    comm_ = &cdt->communicator();
  } else {
    adapted_ = std::make_unique<C10dCommunicator>(pg_);
    comm_ = adapted_.get();
  }
  // Made once here on a one-element bucket, so that bad options fail at registration, not in the
  // middle of a backward pass.
  compress::MakeCompressor(method_, options_, {{0, 1, 1}});
}

CompressionHook::~CompressionHook() { DrainWithoutGil(queue_); }

compress::Compressor& CompressionHook::CompressorOf(
    int64_t bucket, const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<compress::Compressor>& c = compressors_[bucket];
  if (c && shapes_[bucket] != shapes) c.reset();  // DDP rebuilt its buckets
  if (!c) {
    std::vector<compress::TensorView> views;
    size_t offset = 0;
    for (const auto& [rows, cols] : shapes) {
      views.push_back({offset, static_cast<size_t>(rows), static_cast<size_t>(cols)});
      offset += static_cast<size_t>(rows * cols);
    }
    compress::Method method = method_;
    compress::CompressorOptions options = options_;
    if (static_cast<size_t>(bucket) < choices_.size()) {
      method = choices_[static_cast<size_t>(bucket)].method;
      options.powersgd_rank = choices_[static_cast<size_t>(bucket)].powersgd_rank;
    }
    c = compress::MakeCompressor(method, options, views);
    shapes_[bucket] = shapes;
    if (auto it = restored_.find(bucket); it != restored_.end()) {
      c->SetState(it->second);
      if (!restored_residuals_[bucket]) ForgetResidual(*c);
      restored_.erase(it);
      restored_residuals_.erase(bucket);
    }
  }
  return *c;
}

void CompressionHook::Reduce(int64_t bucket, at::Tensor buffer,
                             const std::vector<std::pair<int64_t, int64_t>>& shapes,
                             std::function<void(std::exception_ptr)> done) {
  TORCH_CHECK(
      buffer.scalar_type() == at::kFloat && buffer.is_contiguous() && buffer.device().is_cpu(),
      "cann_dist.hooks.compress: the bucket must be a contiguous float32 CPU tensor "
      "(got ",
      buffer.scalar_type(), ")");
  int64_t total = 0;
  for (const auto& [rows, cols] : shapes) total += rows * cols;
  TORCH_CHECK(total == buffer.numel(), "cann_dist.hooks.compress: the shapes hold ", total,
              " elements, the bucket ", buffer.numel());
  const double launched = Now();
  queue_->Post([this, bucket, shapes, launched, buffer, done = std::move(done)]() mutable {
    try {
      if (adaptive_) BeforeBucket(bucket, launched);
      // Made (or remade) on the queue: an adaptive decision changes compressors here.
      compress::Compressor& c = CompressorOf(bucket, shapes);
      const size_t n = static_cast<size_t>(buffer.numel());
      if (adaptive_ && step_ >= kFirstAdaptiveStep &&
          static_cast<size_t>(bucket) < interval_.bucket_norms.size())
        interval_.bucket_norms[static_cast<size_t>(bucket)] += buffer.norm().item<double>();
      local_.resize(n);
      const double started = Now();
      const size_t wire = c.Reduce(*comm_, buffer.data_ptr<float>(), local_.data(), n);
      buffer.div_(pg_->getSize());
      if (adaptive_) AfterBucket(bucket, launched, started, n, wire);
      done(nullptr);
    } catch (const Error& e) {
      if (auto* cdt = CdtBackendOf(pg_)) cdt->NoteFailure(e);
      done(std::current_exception());
    } catch (...) {
      done(std::current_exception());
    }
  });
}

void CompressionHook::BeforeBucket(int64_t bucket, double launched_s) {
  buckets_seen_ = std::max(buckets_seen_, bucket + 1);
  if (bucket != 0) return;
  // Bucket 0: the previous step ended at this launch.
  if (step_ >= kFirstAdaptiveStep) {
    const double step_s = launched_s - step_start_s_;
    const double exposed = std::max(0.0, last_done_s_ - last_launch_s_);
    interval_.steps += 1;
    interval_.wait_s += exposed;
    interval_.compute_s += std::max(0.0, step_s - exposed);
  }
  ++step_;
  step_start_s_ = launched_s;
  if (step_ == kFirstAdaptiveStep) {
    // The plain allreduce of the whole gradient, step 1's (the slowest rank's), and the first
    // choice.
    double plain = step0_comm_s_;
    comm_->Allreduce(&plain, 1, DataType::kFloat64, ReduceOp::kMax)->Wait();
    controller_ = std::make_unique<compress::AdaptiveController>(
        *adaptive_, static_cast<size_t>(buckets_seen_));
    interval_ = {};
    interval_.plain_comm_s = plain;
    interval_.bucket_norms.assign(static_cast<size_t>(buckets_seen_), 0.0);
    Apply(controller_->Initial());
  } else if (step_ > kFirstAdaptiveStep &&
             (step_ - kFirstAdaptiveStep) % adaptive_->interval == 0) {
    Decide();
  }
}

void CompressionHook::AfterBucket(int64_t, double launched_s, double started_s, size_t n,
                                  size_t wire) {
  const double done = Now();
  last_launch_s_ = launched_s;
  last_done_s_ = done;
  if (step_ == kFirstAdaptiveStep - 1) step0_comm_s_ += done - started_s;
  if (step_ < kFirstAdaptiveStep) return;
  interval_.comm_s += done - started_s;
  interval_.bytes_fp32 += 4.0 * static_cast<double>(n);
  interval_.bytes_wire += static_cast<double>(wire);
}

void CompressionHook::Decide() {
  // The interval's figures, summed over the ranks: every rank then decides the same.
  std::vector<double> v = {interval_.steps,  interval_.compute_s,  interval_.wait_s,
                           interval_.comm_s, interval_.bytes_fp32, interval_.bytes_wire};
  v.insert(v.end(), interval_.bucket_norms.begin(), interval_.bucket_norms.end());
  comm_->Allreduce(v.data(), v.size(), DataType::kFloat64, ReduceOp::kSum)->Wait();
  compress::IntervalObservation o = interval_;
  o.steps = v[0];
  o.compute_s = v[1];
  o.wait_s = v[2];
  o.comm_s = v[3];
  o.bytes_fp32 = v[4];
  o.bytes_wire = v[5];
  o.bucket_norms.assign(v.begin() + 6, v.end());
  o.last_step = step_ - 1;
  o.lr_fraction = 1;  // the hook does not see the schedule
  Apply(controller_->Decide(o));
  const double plain = interval_.plain_comm_s;
  interval_ = {};
  interval_.plain_comm_s = plain;
  interval_.bucket_norms.assign(o.bucket_norms.size(), 0.0);
}

void CompressionHook::Apply(const compress::Decision& d) {
  std::lock_guard<std::mutex> lock(mu_);
  DecisionRecord rec{step_, d.phase, d.reason, {}};
  for (size_t b = 0; b < d.buckets.size(); ++b) {
    const compress::BucketChoice& c = d.buckets[b];
    rec.buckets.push_back(c.method == compress::Method::kPowerSgd
                              ? "powersgd:" + std::to_string(c.powersgd_rank)
                              : compress::MethodName(c.method));
    const bool same = b < choices_.size() && choices_[b].method == c.method &&
                      choices_[b].powersgd_rank == c.powersgd_rank;
    if (!same) compressors_.erase(static_cast<int64_t>(b));  // remade at its next use
  }
  choices_ = d.buckets;
  decisions_.push_back(std::move(rec));
}

std::vector<CompressionHook::DecisionRecord> CompressionHook::Decisions() {
  std::lock_guard<std::mutex> lock(mu_);
  return decisions_;
}

void CompressionHook::ForgetResidual(compress::Compressor& c) {
  if (auto* ef = dynamic_cast<compress::ErrorFeedback*>(&c)) ef->ForgetResidual();
}

std::map<int64_t, std::vector<float>> CompressionHook::State() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int64_t, std::vector<float>> out = restored_;
  for (const auto& [b, c] : compressors_) out[b] = c->GetState();
  return out;
}

std::string CompressionHook::SetState(const std::map<int64_t, std::vector<float>>& state,
                                      bool residuals) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string left_out;
  for (const auto& [b, s] : state) {
    auto it = compressors_.find(b);
    if (it == compressors_.end()) {
      restored_[b] = s;  // the bucket's compressor takes it at its first use
      restored_residuals_[b] = residuals;
      continue;
    }
    const std::string why = it->second->SetState(s);
    if (!residuals) ForgetResidual(*it->second);
    if (!why.empty())
      left_out += (left_out.empty() ? "" : "; ") + ("bucket " + std::to_string(b) + ": " + why);
  }
  return left_out;
}

}  // namespace cdt::python
