#include "train/compression_steering.h"
#include "compress/registry.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace cdt::train {

bool MomentumInCompressor(const TrainOptions& o) {
  using compress::Method;
  const ReductionOptions& c = o.reduction;
  const std::optional<Method> m =
      compress::ParseMethod(c.compress);  // validated: a name or adaptive
  return c.momentum_correction && c.error_feedback && o.optimizer.name == "sgd" &&
         o.optimizer.momentum > 0 &&
         (m == Method::kTopK || m == Method::kRandomK || m == Method::kSignSgd);
}

CompressionSetup MakeCompressionSetup(const ReductionOptions& o, uint64_t seed, int world_size) {
  CompressionSetup s;
  s.adaptive = o.compress == "adaptive";
  if (!s.adaptive) s.method = compress::MethodNamed(o.compress, "--compress");
  s.ratio = o.compress_ratio > 0 ? o.compress_ratio : compress::DefaultRatio(s.method);
  if (s.ratio > 0) s.options.ratio = s.ratio;  // else (adaptive) the library default
  s.options.sparse_values = compress::SparseValuesNamed(o.compress_values);
  s.options.powersgd_rank = o.powersgd_rank;
  s.options.powersgd_min_saved_bytes = o.powersgd_min_saved_bytes;
  s.options.seed = seed;
  s.options.error_feedback =
      false;  // the reducer wraps each bucket, so that swaps keep the residual
  if (s.adaptive || s.method != compress::Method::kNone) {
    // Adaptive starts at PowerSGD of the controller's low rank (its warmup choice); on one worker,
    // with nothing to send, uncompressed (CompressionSteering says so).
    const compress::Method first = !s.adaptive       ? s.method
                                   : world_size == 1 ? compress::Method::kNone
                                                     : compress::Method::kPowerSgd;
    compress::CompressorOptions fo = s.options;
    if (s.adaptive) fo.powersgd_rank = compress::AdaptiveOptions().low_rank;
    s.factory = [fo, first](size_t, const std::vector<compress::TensorView>& t) {
      return compress::MakeCompressor(first, fo, t);
    };
  }
  return s;
}

CompressionSteering::CompressionSteering(const ReductionOptions& o, int64_t warmup_steps,
                                         bool progress, const Log& log,
                                         const CompressionSetup& setup, Communicator& comm,
                                         GradientReducer& reducer, int64_t first_step,
                                         TrainResult* r, const std::vector<double>* resumed)
    : progress_(progress), log_(log), setup_(setup), reducer_(reducer), r_(*r), rank_(comm.rank()) {
  if (!setup_.adaptive) {
    r_.compression_phases.push_back({first_step, "fixed", compress::MethodName(setup_.method),
                                     ParameterOf(setup_.method, o.powersgd_rank)});
    if (rank_ == 0 && reducer_.num_buckets() > 0) WarnIfTheKnobHasNoHold(o);
    return;
  }
  // One worker: nothing crosses a network, so compressing could only cost accuracy and time.
  if (comm.size() == 1) {  // the buckets were made uncompressed (MakeCompressionSetup)
    r_.compression_phases.push_back({first_step, "single-worker", "none", 0.0});
    log_.Info(
        "compress: adaptive on one worker: no communication to save, every bucket is sent "
        "uncompressed");
    return;
  }
  compress::AdaptiveOptions ao;
  ao.interval = o.compress_interval;
  ao.min_exposed = o.compress_min_exposed;
  ao.warmup_steps = warmup_steps;
  // What each bucket sends at each PowerSGD rank the controller may choose.
  std::vector<std::vector<double>> wire(reducer_.num_buckets());
  for (size_t b = 0; b < wire.size(); ++b)
    for (int rank = 1; rank <= std::max(ao.low_rank, ao.high_rank); ++rank)
      wire[b].push_back(static_cast<double>(compress::PowerSgdWireBytes(
          reducer_.bucket_tensors(b), rank, setup_.options.powersgd_min_saved_bytes)));
  const auto start_afresh = [&] {
    controller_ = std::make_unique<compress::AdaptiveController>(ao, reducer_.num_buckets(), wire);
    interval_norms_.assign(reducer_.num_buckets(), 0.0);
    interval_start_ = latest_ = {};
    interval_steps_ = 0;
    in_force_ = controller_->Initial();
    in_force_.from_step = first_step;
  };
  start_afresh();
  const bool resumed_here = resumed && Resume(*resumed, first_step);
  // What uncompressed communication costs here: one allreduce of the whole gradient on the bulk
  // channel, after one untimed, the slowest rank's time (every rank gets the same). With it,
  // whether any rank could not resume the controller: every rank goes on from it, or none.
  std::vector<float> probe(static_cast<size_t>(r_.params), 0.0f);
  comm.Allreduce(probe.data(), probe.size(), DataType::kFloat32, ReduceOp::kSum)->Wait();
  const auto tp = std::chrono::steady_clock::now();
  comm.Allreduce(probe.data(), probe.size(), DataType::kFloat32, ReduceOp::kSum)->Wait();
  double slowest[2] = {std::chrono::duration<double>(std::chrono::steady_clock::now() - tp).count(),
                       resumed && !resumed_here ? 1.0 : 0.0};
  comm.Allreduce(slowest, 2, DataType::kFloat64, ReduceOp::kMax)->Wait();
  plain_comm_s_ = slowest[0];
  const bool resumed_everywhere = resumed && slowest[1] == 0;
  if (resumed && !resumed_everywhere) start_afresh();
  // Step times are the machine's and the link's that measured them: where the uncompressed
  // allreduce now takes less than half or more than twice as long as it did, measure again.
  const bool link_changed = resumed_everywhere && (plain_comm_s_ > 2 * resumed_plain_comm_s_ ||
                                                   2 * plain_comm_s_ < resumed_plain_comm_s_);
  if (link_changed) controller_->ForgetStepTimes();
  const auto& first = in_force_.buckets[0];
  r_.compression_phases.push_back({first_step, in_force_.phase, compress::MethodName(first.method),
                                   ParameterOf(first.method, first.powersgd_rank)});
  if (resumed_everywhere) {
    Apply(in_force_);  // the compressors of the checkpoint's step, before their states return
    // The interval ended with the step before the checkpoint's, and the run stopped there: its
    // sums go out now, for the decision the run not stopped would have taken before this step.
    if (interval_steps_ > 0 && first_step % controller_->options().interval == 0)
      SubmitInterval(first_step - 1);
  }
  if (rank_ != 0) return;
  if (resumed_everywhere)
    log_.Info(
        "compress: adaptive resumed at step {}: phase {} {}{} ({}, chosen for step {} on); an "
        "uncompressed allreduce of the gradient takes {:.1f} ms here{}",
        first_step, in_force_.phase, compress::MethodName(first.method),
        first.method == compress::Method::kPowerSgd ? " rank " + std::to_string(first.powersgd_rank)
                                                    : "",
        in_force_.reason, in_force_.from_step, 1e3 * plain_comm_s_,
        link_changed ? fmt::format(", {:.1f} ms before the stop: the step times measured then "
                                   "are forgotten",
                                   1e3 * resumed_plain_comm_s_)
                     : "");
  else
    log_.Info(
        "compress: adaptive{}; an uncompressed allreduce of the gradient takes {:.1f} ms here; "
        "step {} phase {} powersgd rank {} ({})",
        resumed ? ": --resume: no controller state that fits on every rank (another world size "
                  "or bucket layout, or a checkpoint of an older version), the controller starts "
                  "again"
                : "",
        1e3 * plain_comm_s_, first_step, in_force_.phase, ao.low_rank, in_force_.reason);
}

void CompressionSteering::WarnIfTheKnobHasNoHold(const ReductionOptions& o) const {
  const std::vector<size_t> elements = reducer_.bucket_elements();
  // PowerSGD sends a matrix whole where its factors would save less than the minimum: at a rank
  // that high for every matrix, "powersgd" is an uncompressed allreduce.
  if (setup_.method == compress::Method::kPowerSgd) {
    bool factors_any = false;
    for (size_t b = 0; b < elements.size() && !factors_any; ++b)
      factors_any =
          compress::PowerSgdWireBytes(reducer_.bucket_tensors(b), o.powersgd_rank,
                                      setup_.options.powersgd_min_saved_bytes) < 4 * elements[b];
    if (!factors_any)
      log_.Warning(
          "compress: powersgd at --powersgd-rank {} factors no matrix of this model (none would "
          "save {} bytes or more, --powersgd-min-saved-bytes): every bucket is sent "
          "uncompressed; lower --powersgd-rank",
          o.powersgd_rank, setup_.options.powersgd_min_saved_bytes);
  }
  // Top-k and random-k send at least one element of a bucket: below one element of the largest,
  // every bucket sends one a step whatever the ratio, and error feedback holds nearly everything.
  if (compress::IsSparse(setup_.method)) {
    const size_t largest = *std::max_element(elements.begin(), elements.end());
    if (largest > 0 && setup_.ratio * static_cast<double>(largest) < 1.0)
      log_.Warning(
          "compress: {} at --compress-ratio {:g} is less than one element of the largest bucket "
          "({} elements): every bucket sends 1 element a step and error feedback holds nearly "
          "all of the gradient; use --compress-ratio {:.2g} or more",
          compress::MethodName(setup_.method), setup_.ratio, largest,
          1.0 / static_cast<double>(largest));
  }
}

std::string CompressLessHint(const CompressionSetup& s) {
  using compress::Method;
  if (s.adaptive) return "";
  if (compress::IsSparse(s.method)) return ", or raise --compress-ratio";
  if (s.method == Method::kPowerSgd) return ", or raise --powersgd-rank";
  if (s.method == Method::kInt8 || s.method == Method::kSignSgd)
    return std::string(", or a milder --compress than ") + compress::MethodName(s.method);
  return "";
}

double CompressionSteering::ParameterOf(compress::Method method, int rank) const {
  return method == compress::Method::kPowerSgd ? double(rank)
         : compress::IsSparse(method)          ? setup_.ratio
                                               : 0.0;
}

void CompressionSteering::AfterBackward(int64_t step, int64_t end_step, double comm_wait_s,
                                        double optimizer_s, double lr_fraction) {
  if (!controller_) return;
  for (size_t b = 0; b < reducer_.num_buckets(); ++b)
    interval_norms_[b] += reducer_.gradient_norm(b);
  ++interval_steps_;
  latest_ = TotalsNow(r_.step_time.forward_s + r_.step_time.backward_s, comm_wait_s, optimizer_s);
  latest_lr_ = lr_fraction;
  if ((step + 1) % controller_->options().interval != 0 || step + 1 >= end_step) return;
  SubmitInterval(step);
}

CompressionSteering::Totals CompressionSteering::TotalsNow(double compute, double wait,
                                                           double optimizer) const {
  const ReducerStats& rs = reducer_.stats();
  return {compute,       wait,      rs.comm_seconds, rs.bytes_fp32,
          rs.bytes_wire, optimizer, rs.residual_sq,  rs.compressed_sq};
}

void CompressionSteering::SubmitInterval(int64_t step) {
  interval_sum_.assign(1, static_cast<double>(interval_steps_));
  interval_sum_.insert(interval_sum_.end(), interval_norms_.begin(), interval_norms_.end());
  const std::vector<double> grew = latest_.Since(interval_start_);
  interval_sum_.insert(interval_sum_.end(), grew.begin(), grew.end());
  interval_start_ = latest_;
  std::fill(interval_norms_.begin(), interval_norms_.end(), 0.0);
  interval_steps_ = 0;
  interval_last_step_ = step;
  interval_lr_ = latest_lr_;
  interval_work_ = reducer_.SubmitInOrder(true, [this](Communicator& c) {
    return c.Allreduce(interval_sum_.data(), interval_sum_.size(), DataType::kFloat64,
                       ReduceOp::kSum);
  });
}

std::vector<double> CompressionSteering::State() const {
  if (!controller_) return {};
  std::vector<double> s = controller_->State(in_force_);
  s.insert(s.begin(), static_cast<double>(s.size()));
  // The reductions' figures as they are now, when none is in flight (a checkpoint settles
  // first): the last step's reductions end after its AfterBackward.
  const Totals z = TotalsNow(latest_.compute, latest_.wait, latest_.optimizer);
  s.push_back(plain_comm_s_);
  s.push_back(static_cast<double>(interval_steps_));
  s.push_back(latest_lr_);
  s.insert(s.end(), interval_norms_.begin(), interval_norms_.end());
  const std::vector<double> grew = z.Since(interval_start_);
  s.insert(s.end(), grew.begin(), grew.end());
  return s;
}

bool CompressionSteering::Resume(const std::vector<double>& resumed, int64_t first_step) {
  const size_t nb = reducer_.num_buckets();
  if (resumed.empty() || !(resumed[0] >= 0) || resumed[0] > 1e9) return false;
  const size_t n = static_cast<size_t>(resumed[0]);
  if (resumed.size() != 1 + n + 3 + nb + 8) return false;
  const auto at = resumed.begin() + 1;
  const std::vector<double> tail(at + static_cast<long>(n), resumed.end());
  for (double v : tail)
    if (!std::isfinite(v)) return false;
  resumed_plain_comm_s_ = tail[0];
  const double steps = tail[1];
  if (steps < 0 || steps > static_cast<double>(controller_->options().interval) ||
      steps != std::floor(steps))
    return false;
  compress::Decision d;
  if (!controller_->Restore(std::vector<double>(at, at + static_cast<long>(n)), &d) ||
      d.from_step > first_step)
    return false;
  in_force_ = std::move(d);
  interval_steps_ = static_cast<int64_t>(steps);
  latest_lr_ = tail[2];
  interval_norms_.assign(tail.begin() + 3, tail.begin() + 3 + static_cast<long>(nb));
  const double* t = tail.data() + 3 + nb;
  // The totals of this run start at zero: the interval's start lies that far before them.
  interval_start_ = {-t[0], -t[1], -t[2], -t[3], -t[4], -t[5], -t[6], -t[7]};
  latest_ = {};
  return true;
}

void CompressionSteering::DecideIfDue() {
  if (!interval_work_) return;
  interval_work_->Wait();
  interval_work_.reset();
  const size_t nb = reducer_.num_buckets();
  compress::IntervalObservation obs;
  obs.last_step = interval_last_step_;
  obs.steps = interval_sum_[0];
  obs.bucket_norms.assign(interval_sum_.begin() + 1,
                          interval_sum_.begin() + 1 + static_cast<long>(nb));
  obs.compute_s = interval_sum_[1 + nb];
  obs.wait_s = interval_sum_[2 + nb];
  obs.comm_s = interval_sum_[3 + nb];
  obs.bytes_fp32 = interval_sum_[4 + nb];
  obs.bytes_wire = interval_sum_[5 + nb];
  obs.optimizer_s = interval_sum_[6 + nb];
  obs.lr_fraction = interval_lr_;
  obs.plain_comm_s = plain_comm_s_;
  in_force_ = controller_->Decide(obs);
  const compress::Decision& d = in_force_;
  Apply(d);
  if (rank_ != 0) return;
  // The residual and the overlap of the interval's reductions on all ranks, not the run's so far:
  // once the buckets go uncompressed the residual reads 0.
  const double residual_sq = interval_sum_[7 + nb], compressed_sq = interval_sum_[8 + nb];
  const auto& first = d.buckets[0];
  log_.Info(
      "{}compress: step {}  phase {}  {}{}  {:.2f} MB -> {:.2f} MB per rank per step  residual "
      "{:.1f}%  overlap {:.2f}  ({})",
      progress_ ? "\r" : "", d.from_step, d.phase, compress::MethodName(first.method),
      first.method == compress::Method::kPowerSgd ? " rank " + std::to_string(first.powersgd_rank)
                                                  : "",
      obs.bytes_fp32 / std::max(1.0, obs.steps) / 1e6,
      obs.bytes_wire / std::max(1.0, obs.steps) / 1e6,
      compressed_sq > 0 ? 100 * std::sqrt(residual_sq / compressed_sq) : 0.0,
      obs.comm_s > 0 ? std::clamp(1 - obs.wait_s / obs.comm_s, 0.0, 1.0) : 0.0, d.reason);
}

void CompressionSteering::Apply(const compress::Decision& d) {
  for (size_t b = 0; b < reducer_.num_buckets(); ++b) {
    compress::CompressorOptions c = setup_.options;
    c.powersgd_rank = std::max(1, d.buckets[b].powersgd_rank);
    reducer_.SetCompressor(
        b, compress::MakeCompressor(d.buckets[b].method, c, reducer_.bucket_tensors(b)));
  }
  const auto& first = d.buckets[0];
  const auto& last = r_.compression_phases.back();
  const double parameter = ParameterOf(first.method, first.powersgd_rank);
  const std::string name = compress::MethodName(first.method);
  if (last.phase != d.phase || last.compressor != name || last.parameter != parameter)
    r_.compression_phases.push_back({d.from_step, d.phase, name, parameter});
}

void CompressionSteering::Wait() {
  if (interval_work_) interval_work_->Wait();
}

}  // namespace cdt::train
