#include "train/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "cdt/error.h"

namespace cdt::train {

GradientReducer::GradientReducer(Communicator& comm, Communicator* priority,
                                 std::vector<torch::Tensor> params, size_t bucket_bytes,
                                 CompressorFactory compression, bool error_feedback,
                                 double ef_momentum)
    : comm_(comm),
      priority_(priority),
      params_(std::move(params)),
      factory_(std::move(compression)),
      error_feedback_(error_feedback),
      ef_momentum_(ef_momentum) {
  if (priority_ && (priority_->size() != comm_.size() || priority_->rank() != comm_.rank()))
    throw Error(ErrorCode::kInvalidArgument,
                "gradient reducer: the priority channel connects a different group");
  slots_.resize(params_.size());
  ready_.assign(params_.size(), false);
  int64_t total = 0, before = 0;
  for (size_t k = 0; k < params_.size(); ++k) total += params_[k].numel();
  // Reverse registration order: the last layers' gradients are ready first. With two channels,
  // the priority region (the last quarter of the bytes: what the next forward needs first) starts
  // a bucket of its own, so that no bulk parameter waits in a bucket for an early layer's
  // backward (an fc1 row block with conv2's bias waited for all of conv2's backward), and is cut
  // finer: buckets of an eighth of the size, so that the input layer's parameters travel alone
  // and the layer before it is reduced while the input layer's backward still runs. There a
  // bucket smaller than a sixteenth of that takes the next parameter whatever its size (a bias
  // goes with its weight instead of alone).
  const size_t priority_bucket_bytes = std::max<size_t>(bucket_bytes / 8, 1);
  // Whether a parameter preceded by `elements_before` gradient elements in backward order is in
  // the priority region.
  auto priority_at = [&](int64_t elements_before) {
    return priority_ != nullptr && elements_before > 0 && 4 * elements_before >= 3 * total;
  };
  size_t bytes_in_bucket = 0;
  bool with_successor = false;
  for (size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    if (p.scalar_type() != torch::kFloat32)
      throw Error(ErrorCode::kInvalidArgument,
                  "gradient reducer: parameter " + std::to_string(k) + " is not float32");
    const size_t bytes = static_cast<size_t>(p.numel()) * 4;
    // Early layers (the last quarter of the bytes in backward order) go first in the next forward.
    // Only a quarter: what rides the priority channel is what the next forward waits for before it
    // can start, and a big bucket there would make the small early ones queue behind it.
    const bool in_priority = priority_at(before);
    const size_t cap = in_priority ? priority_bucket_bytes : bucket_bytes;
    bool full = bytes_in_bucket > 0 && bytes_in_bucket + bytes > cap &&
                !(in_priority && bytes_in_bucket < cap / 16);
    // A small parameter (a bias: in reverse registration order it comes just before its weight,
    // and autograd produces both at once) that fits but whose successor will not, starts the next
    // bucket with that successor. Otherwise this bucket would be ready only when the next
    // layer's backward is done (each fc1 row block's bucket held the next block's bias).
    const bool joins_previous = with_successor;  // the small one before went ahead for it
    with_successor = false;
    if (joins_previous) {
      full = false;
    } else if (!full && bytes_in_bucket > 0 && k > 0 && bytes < cap / 64) {
      const size_t next = static_cast<size_t>(params_[k - 1].numel()) * 4;
      with_successor =
          priority_at(before + p.numel()) == in_priority && bytes_in_bucket + bytes + next > cap;
      full = with_successor;
    }
    if (buckets_.empty() || full || in_priority != buckets_.back().priority) {
      buckets_.emplace_back();
      buckets_.back().priority = in_priority;
      bytes_in_bucket = 0;
    }
    Bucket& b = buckets_.back();
    slots_[k] = {static_cast<int>(buckets_.size() - 1), static_cast<int64_t>(bytes_in_bucket / 4)};
    b.params.push_back(k);
    bytes_in_bucket += bytes;
    before += p.numel();
  }
  for (Bucket& b : buckets_) {
    int64_t n = 0;
    for (size_t k : b.params) n += params_[k].numel();
    b.flat = torch::zeros({n}, torch::kFloat32);
  }
  stats_.buckets = static_cast<int>(buckets_.size());
  for (size_t i = 0; i < buckets_.size(); ++i) launch_order_.push_back(i);
  if (factory_) {
    // Bounds Work::Wait of a whole compressed reduction; each collective inside has its own
    // timeout.
    const auto limit = std::chrono::minutes(10);
    runner_ = std::make_unique<TaskRunner>("cdt-compress", limit);
    if (priority_) priority_runner_ = std::make_unique<TaskRunner>("cdt-compress-pri", limit);
    for (size_t i = 0; i < buckets_.size(); ++i) {
      SetCompressor(i, factory_(i, bucket_tensors(i)));
      buckets_[i].local.resize(static_cast<size_t>(buckets_[i].flat.numel()));
    }
  }
  stats_.bucket_comm_seconds.assign(buckets_.size(), 0);
  stats_.bucket_wait_seconds.assign(buckets_.size(), 0);
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    hooks_.push_back({k, params_[k].register_hook(
                             [this, k](const torch::Tensor& grad) { OnGradient(k, grad); })});
  }
}

std::vector<compress::TensorView> GradientReducer::bucket_tensors(size_t b) const {
  std::vector<compress::TensorView> out;
  for (size_t k : buckets_[b].params) {
    const torch::Tensor& p = params_[k];
    const size_t rows = p.dim() == 0 ? 1 : static_cast<size_t>(p.size(0));
    out.push_back({static_cast<size_t>(slots_[k].offset), rows,
                   static_cast<size_t>(p.numel()) / std::max<size_t>(1, rows)});
  }
  return out;
}

void GradientReducer::SetCompressor(size_t b, std::unique_ptr<compress::Compressor> c) {
  Bucket& bucket = buckets_.at(b);
  if (outstanding(b))
    throw Error(ErrorCode::kInvalidArgument, "gradient reducer: compressor of bucket " +
                                                 std::to_string(b) + " changed while it runs");
  if (!c || !c->exact()) bucket.plain_runs = 0;
  auto* ef = dynamic_cast<compress::ErrorFeedback*>(bucket.compressor.get());
  if (ef)
    ef->set_inner(std::move(c));
  else if (error_feedback_)
    bucket.compressor = std::make_unique<compress::ErrorFeedback>(std::move(c), ef_momentum_);
  else
    bucket.compressor = std::move(c);
}

std::shared_ptr<Work> GradientReducer::SubmitInOrder(
    bool priority_channel, const std::function<std::shared_ptr<Work>(Communicator&)>& op) {
  const bool use_priority = priority_channel && priority_ != nullptr;
  Communicator& comm = use_priority ? *priority_ : comm_;
  TaskRunner* runner = use_priority ? priority_runner_.get() : runner_.get();
  if (!runner || direct_[use_priority ? 1 : 0]) return op(comm);
  return runner->Submit("ordered collective", [op, &comm] { op(comm)->Wait(); });
}

std::string GradientReducer::compressor_name(size_t b) const {
  return buckets_.at(b).compressor ? buckets_[b].compressor->name() : "none";
}

std::vector<std::vector<float>> GradientReducer::CompressorStates() const {
  std::vector<std::vector<float>> out;
  for (const Bucket& b : buckets_)
    out.push_back(b.compressor ? b.compressor->GetState() : std::vector<float>{});
  return out;
}

std::string GradientReducer::SetCompressorStates(const std::vector<std::vector<float>>& states) {
  std::vector<std::pair<std::string, std::string>> left_out;  // reason, its buckets
  for (size_t i = 0; i < buckets_.size() && i < states.size(); ++i) {
    if (!buckets_[i].compressor) continue;
    const std::string why = buckets_[i].compressor->SetState(states[i]);
    if (why.empty()) continue;
    auto same = std::find_if(left_out.begin(), left_out.end(),
                             [&](const auto& l) { return l.first == why; });
    if (same == left_out.end()) same = left_out.insert(left_out.end(), {why, {}});
    same->second += (same->second.empty() ? "" : ", ") + std::to_string(i);
  }
  std::string out;
  for (const auto& [why, which] : left_out)
    out += (out.empty() ? "" : "; ") +
           std::string(which.find(',') == std::string::npos ? "bucket " : "buckets ") + which +
           ": " + why;
  return out;
}

GradientReducer::~GradientReducer() {
  // The hooks point at this object; the parameters may outlive it.
  for (auto [k, handle] : hooks_) params_[k].remove_hook(handle);
  // Outstanding work writes into our buffers: let it finish (or fail) before they go.
  for (Bucket& b : buckets_) WaitIgnoringError(b.work);
}

std::vector<size_t> GradientReducer::bucket_elements() const {
  std::vector<size_t> out;
  for (const Bucket& b : buckets_) out.push_back(static_cast<size_t>(b.flat.numel()));
  return out;
}

std::vector<bool> GradientReducer::bucket_priority() const {
  std::vector<bool> out;
  for (const Bucket& b : buckets_) out.push_back(b.priority);
  return out;
}

void GradientReducer::SetLaunchOrder(std::vector<size_t> order) {
  std::vector<bool> seen(buckets_.size(), false);
  bool valid = order.size() == buckets_.size();
  for (size_t b : order) {
    valid = valid && b < seen.size() && !seen[b];
    if (valid) seen[b] = true;
  }
  if (!valid)
    throw Error(ErrorCode::kInvalidArgument,
                "gradient reducer: a launch order must name each of the " +
                    std::to_string(buckets_.size()) + " buckets once");
  if (armed_)
    throw Error(ErrorCode::kInvalidArgument,
                "gradient reducer: launch order changed during a backward");
  launch_order_ = std::move(order);
}

void GradientReducer::PrepareForBackward(bool sync) {
  sync_ = sync;
  armed_ = sync;
  if (!sync) return;
  for (size_t i = 0; i < buckets_.size(); ++i)
    if (outstanding(i))
      throw Error(ErrorCode::kInvalidArgument, "gradient reducer: bucket " + std::to_string(i) +
                                                   " of the previous backward was never collected");
  next_launch_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
    b.begun.reset();
    b.collected = false;
  }
  if (!factory_) return;
  bool direct[2] = {ef_momentum_ == 0, ef_momentum_ == 0};
  for (const Bucket& b : buckets_)
    direct[b.priority ? 1 : 0] &=
        b.compressor && b.compressor->exact() && b.plain_runs > 0;
  for (int c = 0; c < 2; ++c) {
    TaskRunner* runner = c == 1 ? priority_runner_.get() : runner_.get();
    // When idle: after everything queued, the buckets' Ends included.
    if (direct[c] && !direct_[c] && runner)
      runner
          ->Submit(
              "drain", [] {}, true)
          ->Wait();
    direct_[c] = direct[c];
  }
  for (Bucket& b : buckets_) b.direct = direct_[b.priority ? 1 : 0];
}

void GradientReducer::OnGradient(size_t k, const torch::Tensor& grad) {
  if (!armed_ || ready_[k]) return;
  const Slot& s = slots_[k];
  Bucket& b = buckets_[static_cast<size_t>(s.bucket)];
  auto dst = b.flat.narrow(0, s.offset, params_[k].numel());
  torch::NoGradGuard no_grad;
  const torch::Tensor& accumulated = params_[k].grad();
  if (accumulated.defined())
    dst.copy_((grad + accumulated).reshape({-1}));
  else
    dst.copy_(grad.reshape({-1}));
  ready_[k] = true;
  if (--b.pending == 0) {
    b.ready = std::chrono::steady_clock::now();
    LaunchReady();
  }
}

void GradientReducer::LaunchReady() {
  while (next_launch_ < buckets_.size() && buckets_[launch_order_[next_launch_]].pending == 0) {
    const size_t index = launch_order_[next_launch_++];
    Bucket& b = buckets_[index];
    b.launched = std::chrono::steady_clock::now();
    Communicator& comm = b.priority ? *priority_ : comm_;
    const size_t n = static_cast<size_t>(b.flat.numel());
    if (factory_) b.grad_norm = b.flat.norm().item<double>();
    if (!b.compressor || b.direct) {
      b.work = comm.Allreduce(b.flat.data_ptr<float>(), n, DataType::kFloat32, ReduceOp::kSum);
      b.wire = 4 * n;
      continue;
    }
    // Begin submits the bucket's collectives, in launch order. End waits for the last of them
    // and decodes, when the channel's runner has nothing else queued: a next bucket that is
    // ready by then Begins first, and its first collective queues right behind this one's last
    // (compress/compressor.h). The runner owns nothing: the bucket (and this reducer) outlive
    // the tasks (the destructor waits for them).
    TaskRunner& runner = b.priority ? *priority_runner_ : *runner_;
    const std::string name = "compressed bucket " + std::to_string(index);
    std::shared_ptr<Work> begun = runner.Submit(name + " (begin)", [&comm, &b, n] {
      b.compressor->Begin(comm, b.flat.data_ptr<float>(), b.local.data(), n);
    });
    b.begun = begun;
    b.work = runner.Submit(
        name,
        [&b, begun] {
          begun->Wait();  // ran before (same runner); rethrows what stopped it
          b.wire = b.compressor->End();
        },
        true);
  }
}

void GradientReducer::LaunchRemaining() {
  if (!armed_)
    throw Error(ErrorCode::kInvalidArgument,
                "gradient reducer: LaunchRemaining without PrepareForBackward(true)");
  // Parameters autograd did not reach this time: their gradient is what was accumulated, or zero.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (ready_[k]) continue;
    const Slot& s = slots_[k];
    Bucket& b = buckets_[static_cast<size_t>(s.bucket)];
    auto dst = b.flat.narrow(0, s.offset, params_[k].numel());
    const torch::Tensor& accumulated = params_[k].grad();
    if (accumulated.defined())
      dst.copy_(accumulated.reshape({-1}));
    else
      dst.zero_();
    ready_[k] = true;
    if (--b.pending == 0) b.ready = std::chrono::steady_clock::now();
  }
  LaunchReady();
  armed_ = false;
}

double GradientReducer::Collect(size_t i) {
  Bucket& b = buckets_.at(i);
  if (!b.work || b.collected) return 0;
  const auto start = std::chrono::steady_clock::now();
  b.collected = true;  // even if Wait throws: the communicator is broken then, nothing to retry
  b.work->Wait();
  const auto end = std::chrono::steady_clock::now();
  const double waited = std::chrono::duration<double>(end - start).count();
  const Work::Interval ran = RunInterval(b);
  if (timeline_ && timeline_->Recording()) {
    const std::string name = "bucket " + std::to_string(i);
    const auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
    // Where the gradients waited: for the launch order (ready -> launched), for the channel's
    // earlier operations (launched -> ran.start).
    timeline_->Span(b.priority ? Timeline::kPriority : Timeline::kBulk, name, ran.start, ran.end,
                    {{"elements", static_cast<double>(b.flat.numel())},
                     {"wire_bytes", static_cast<double>(b.wire)},
                     {"held_for_order_us", us(b.launched - b.ready)},
                     {"queued_us", us(ran.start - b.launched)}});
    if (waited > 0) timeline_->Span(Timeline::kTraining, "wait " + name, start, end);
  }
  const double ran_s = std::chrono::duration<double>(ran.end - ran.start).count();
  stats_.comm_seconds += ran_s;
  stats_.wait_seconds += waited;
  stats_.bucket_comm_seconds[i] += ran_s;
  stats_.bucket_wait_seconds[i] += waited;
  const double fp32 = static_cast<double>(b.flat.numel()) * 4;
  stats_.bytes_fp32 += fp32;
  stats_.bytes_wire += static_cast<double>(b.wire);
  if (b.direct) {  // sent exactly: no residual, and the input was the gradient (e was zero)
    ++stats_.direct_reductions;
    stats_.compressed_sq += b.grad_norm * b.grad_norm;
  } else if (auto* ef = dynamic_cast<const compress::ErrorFeedback*>(b.compressor.get())) {
    stats_.residual_sq += ef->residual_norm() * ef->residual_norm();
    stats_.compressed_sq += ef->input_norm() * ef->input_norm();
  }
  if (b.compressor) b.plain_runs = b.compressor->exact() ? b.plain_runs + 1 : 0;
  torch::NoGradGuard no_grad;
  for (size_t k : b.params) {
    auto summed = b.flat.narrow(0, slots_[k].offset, params_[k].numel());
    torch::Tensor& grad = params_[k].mutable_grad();
    if (!grad.defined())
      grad = summed.view_as(params_[k]).clone();
    else
      grad.copy_(summed.view_as(params_[k]));
  }
  return waited;
}

Work::Interval GradientReducer::RunInterval(const Bucket& b) {
  const Work::Interval ran = b.work->run_interval();
  if (b.direct || !b.begun) return ran;
  return {b.begun->run_interval().start, ran.end};
}

double GradientReducer::FinishBackward() {
  LaunchRemaining();
  double waited = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) waited += Collect(i);
  return waited;
}

}  // namespace cdt::train
