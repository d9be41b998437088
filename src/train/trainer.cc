// The training loop over the trainer's components (docs/training.md, docs/architecture.md):
//
//   data         TrainingData (datasets, global sampler, batch balancer)     DataOptions
//   replica      the model, its optimizer, broadcast, evaluation            ModelOptions,
//                                                                            OptimizerOptions
//   reduction    GradientReducer, CompressionSteering, UpdateScheduler      ReductionOptions
//   checkpoints  CheckpointSchedule (capture, write, health), resume        CheckpointOptions
//   metrics      the loss in flight and the progress line, Timeline,        MetricsOptions
//                EnergyWindows
//
// Trainer::Run is the step loop; each step's parts are one method each.
#include "train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "common/unix_time.h"
#include "common/usable_cpus.h"
#include "elastic/checkpoint_store.h"
#include "train/blas_library.h"
#include "train/checkpoint.h"
#include "train/compression_steering.h"
#include "train/elastic_state.h"
#include "train/energy_windows.h"
#include "train/gradient_reducer.h"
#include "train/live_metrics.h"
#include "train/lr_schedule.h"
#include "train/models.h"
#include "train/replica.h"
#include "train/timeline.h"
#include "train/training_data.h"
#include "train/update_scheduler.h"

namespace cdt::train {

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string Who(const Communicator& comm) { return "rank " + std::to_string(comm.rank()); }

class Trainer {
 public:
  Trainer(Communicator& comm, const TrainOptions& o, Communicator* priority,
          ElasticSession* session, const ModelFactory& make_model);
  TrainResult Run();

 private:
  // Set-up, in the order every rank runs its collectives.
  void SetUpReplica();
  void PlaceStart();  // --resume, or the elastic group's committed state; the step count
  void ResumeFromCheckpoint();
  void SetUpReduction();
  void ResumeCompression();

  // One step.
  StepBatch BeginStep();
  double ComputeGradients(const StepBatch& batch);  // this rank's summed loss
  void EndStep(const StepBatch& batch, double compute_before, double loss_sum);
  bool EvaluateIfDue();  // true: --target-accuracy reached, the run stops after this step
  void Checkpoint();
  [[noreturn]] void Regroup();

  // The global loss of a step travels behind its early-layer gradients and is read when the next
  // step has launched its own: reading it right away would wait for every bucket and undo the
  // overlap (a diverged loss is therefore reported one step late). It carries the ranks' health
  // warnings and regroup requests along (summed).
  void SubmitLoss(double loss_sum, size_t samples, bool warned, bool regroup);
  void RecordLoss();
  void ShowProgress(double mean_loss);
  // MetricsOptions::publish: at most once per interval, or at the end (`finished`).
  void Publish(bool finished);
  // Every parameter current, every loss recorded, nothing of ours in flight on any channel: before
  // evaluation, checkpoints and the end.
  void Settle();
  // Elastic: the state after the previous step, in memory (buffers_before: elastic_state.h).
  void SnapshotAt(const Position& p, const std::vector<torch::Tensor>& buffers_before = {});
  void Finish();
  // On the way out by an exception: break both channels (a peer waiting for us fails at once
  // instead of after its timeout), then wait for the collectives still writing into our buffers.
  void AbortInFlight() noexcept;

  Communicator& comm_;
  Communicator* priority_;
  const TrainOptions o_;
  ElasticSession* session_;
  const ModelFactory& make_model_;
  const int W_, me_;
  const Log log_;  // this rank's
  TrainResult fresh_result_;
  TrainResult& r_;  // elastic: the session's, carried across generations

  std::unique_ptr<TrainingData> data_;
  std::shared_ptr<ClassifierModel> model_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
  bool momentum_in_compressor_ = false;
  Position at_;
  int64_t total_steps_ = 0, end_step_ = 0;
  std::unique_ptr<LrSchedule> schedule_;  // warm-up resolved (kAutomaticWarmup)
  double larc_trust_ = 0;                 // resolved (kAutomaticLarc)

  CompressionSetup compression_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<CompressionSteering> steering_;
  std::unique_ptr<UpdateScheduler> updates_;
  std::string compression_path_;
  std::unique_ptr<CheckpointSchedule> checkpoints_;
  std::unique_ptr<EnergyWindows> energy_;

  struct PendingLoss {
    int64_t step = 0;
    double sum[3] = {0, 0, 0};  // loss, ranks whose health monitor warned, regroup requests
    size_t samples = 0;
    std::shared_ptr<Work> work;
  } loss_in_flight_;
  std::shared_ptr<Work> balance_work_;  // --balance-batches: the ranks' speeds in flight
  bool regroup_due_ = false;  // elastic: workers wait to join; end this generation after the step
  Clock::time_point loop_start_, last_progress_, step_clock_, last_publish_;
  double eval_seconds_ = 0, loss_wait_ = 0;
  bool publish_failed_ = false;
};

Trainer::Trainer(Communicator& comm, const TrainOptions& o, Communicator* priority,
                 ElasticSession* session, const ModelFactory& make_model)
    : comm_(comm),
      priority_(priority),
      o_(o),
      session_(session),
      make_model_(make_model),
      W_(comm.size()),
      me_(comm.rank()),
      log_(o.log.ForRank(me_)),
      r_(session ? session->result : fresh_result_) {
  ValidateTrainOptions(o_, !make_model_);
  torch::set_num_threads(
      o_.threads > 0 ? o_.threads : std::max(1, UsableCpus() / std::max(1, o_.local_world_size)));
  const BlasLibrary blas = LoadedBlas();
  if (me_ == 0 && blas.reference && !(session_ && session_->generation > 0))
    log_.Warning("cann-dist-train train: warning: {}", BlasWarning(blas));
  r_.world_size = W_;
  r_.generation = session_ ? session_->generation : 0;
  r_.model = o_.model.name;
  r_.blas = blas.name;
  r_.blas_path = blas.path;
  r_.allocator = o_.allocator;
  r_.allreduce_selection = o_.allreduce_selection;
  r_.elastic = session_ != nullptr;

  // Data (loaded once per process: an elastic worker keeps it across generations).
  std::shared_ptr<const Datasets> datasets = session_ ? session_->data : nullptr;
  if (!datasets) datasets = LoadDatasets(o_.data, o_.seed, Who(comm_));
  if (session_) session_->data = datasets;
  data_ = std::make_unique<TrainingData>(o_.data, o_.seed, datasets, W_, me_);

  SetUpReplica();
  // An elastic group that may grow is checked at the size it may reach, before its first step
  // rather than at the regroup that would end it.
  data_->CheckBatchFits(std::max(W_, o_.max_world_size), Who(comm_));
  PlaceStart();
  SetUpReduction();
  checkpoints_ = std::make_unique<CheckpointSchedule>(o_.checkpoint, me_ == 0, log_);
  end_step_ = o_.stop_after > 0 ? std::min(total_steps_, o_.stop_after) : total_steps_;
}

void Trainer::SetUpReplica() {
  // Identical everywhere: same seed, then rank 0's copy broadcast.
  torch::manual_seed(o_.seed);
  model_ = make_model_ ? make_model_(o_.model) : MakeModel(o_.model);
  if (!model_)
    throw Error(ErrorCode::kInvalidArgument, Who(comm_) + ": the model factory returned no model");
  BroadcastState(comm_, *model_);
  momentum_in_compressor_ = MomentumInCompressor(o_);
  opt_ = MakeOptimizer(o_.optimizer, *model_, momentum_in_compressor_);
  r_.params = 0;
  for (auto& p : model_->parameters()) r_.params += p.numel();
}

void Trainer::PlaceStart() {
  const int64_t global_batch = data_->global_batch();
  total_steps_ = o_.steps > 0 ? o_.steps
                              : static_cast<int64_t>(std::ceil(
                                    o_.epochs * static_cast<double>(data_->steps_per_epoch())));
  if (o_.checkpoint.resume && !(session_ && session_->result.steps > 0)) ResumeFromCheckpoint();
  if (at_.global_batch > 0 && at_.global_batch != global_batch && o_.steps == 0) {
    // Resumed with another global batch (more or fewer workers, another --batch-size): the rest
    // of the run's samples take a different number of steps.
    total_steps_ = at_.step + StepsToFinish(data_->train_count(), o_.epochs, at_, global_batch);
    if (me_ == 0)
      log_.Info("cann-dist-train train: resumed with global batch {} (was {}): {} steps in all",
                global_batch, at_.global_batch, total_steps_);
  }
  at_.global_batch = global_batch;
  if (!session_ || session_->result.steps == 0) r_.first_step = at_.step;
  const bool recovering =
      session_ && RestoreCommittedState(comm_, *session_, *model_, *opt_, o_.seed, &at_);
  if (recovering && session_->snapshots[0].world != W_ && o_.steps == 0)
    // The world changed: the remaining samples of the run take a different number of steps.
    total_steps_ = at_.step + StepsToFinish(data_->train_count(), o_.epochs, at_, global_batch);
  const OptimizerOptions& opt = o_.optimizer;
  LrSchedule s{opt.lr,           global_batch, opt.lr_reference_batch,
               opt.warmup_steps, total_steps_, opt.cosine};
  s.warmup_automatic = opt.warmup_steps == kAutomaticWarmup;
  if (s.warmup_automatic) s.warmup_steps = AutomaticWarmupSteps(s.Scale(), total_steps_);
  larc_trust_ = opt.larc_trust == kAutomaticLarc ? AutomaticLarcTrust(s.Scale()) : opt.larc_trust;
  schedule_ = std::make_unique<LrSchedule>(s);
  if (me_ == 0)
    log_.Info("cann-dist-train train: learning rate {}{}", schedule_->Describe(),
              larc_trust_ > 0 ? fmt::format(", LARC trust {:g}{}", larc_trust_,
                                            opt.larc_trust == kAutomaticLarc ? " (automatic)" : "")
                              : "");
  r_.total_steps = total_steps_;
}

void Trainer::ResumeFromCheckpoint() {
  std::string source;
  int64_t found_step = -1;
  const std::string& dir = o_.checkpoint.dir;
  const std::string bytes =
      NewestCheckpoint(dir, me_ == 0 ? &log_ : nullptr, &source, &found_step, Or(o_.checkpoint.fs));
  AgreeOnResumeState(comm_, found_step, bytes.empty() ? 0 : elastic::StateCrc(bytes), source, dir);
  if (!bytes.empty()) {
    at_ = RestoreState(bytes, *model_, *opt_, o_.seed, source);
    r_.resumed_from = source;
  } else if (me_ == 0) {
    log_.Info("cann-dist-train train: --resume: no checkpoint in '{}', starting at step 0", dir);
  }
}

void Trainer::SetUpReduction() {
  const ReductionOptions& ro = o_.reduction;
  r_.bucket_bytes = BucketBytes(ro, r_.params, &r_.bucket_source);
  // Compression: fixed, or chosen per interval by the adaptive controller.
  compression_ = MakeCompressionSetup(ro, o_.seed, W_);
  reducer_ = std::make_unique<GradientReducer>(
      comm_, priority_, model_->parameters(), r_.bucket_bytes, compression_.factory,
      ro.error_feedback, momentum_in_compressor_ ? o_.optimizer.momentum : 0.0);
  timeline_ =
      std::make_unique<Timeline>(o_.metrics.timeline.empty() ? 0 : o_.metrics.timeline_steps);
  reducer_->set_timeline(timeline_.get());
  r_.compress = ro.compress;
  r_.compress_values = ro.compress_values;
  ResumeCompression();  // constructs steering_
  updates_ = std::make_unique<UpdateScheduler>(*reducer_, *opt_, model_->parameters());
  updates_->set_larc_trust(larc_trust_);
  updates_->LearnLaunchOrders(*model_, Images(data_->train_set(), {0}));
  if (ro.overlap_next_forward)
    model_->set_use_hook(
        [u = updates_.get()](const std::vector<torch::Tensor>& p) { u->BeforeUse(p); });
  r_.buckets = reducer_->stats().buckets;
  r_.bucket_elements = reducer_->bucket_elements();
  r_.bucket_priority = reducer_->bucket_priority();
}

void Trainer::ResumeCompression() {
  // On a resume, this rank's compression state: the residuals and the compressors' own state,
  // and the adaptive controller's, which the steering takes back first (it sets the compressors
  // whose state returns).
  const bool resume = reducer_->compressing() && !r_.resumed_from.empty();
  compression_path_ = CompressionStatePath(o_.checkpoint.dir, me_);
  std::string why_not;
  std::vector<double> adaptive_state;
  const auto states =
      resume ? RestoreCompressionState(compression_path_, at_.step, reducer_->bucket_elements(), W_,
                                       o_.reduction.compress, &why_not, &adaptive_state)
             : std::vector<std::vector<float>>();
  steering_ = std::make_unique<CompressionSteering>(
      o_.reduction, schedule_->warmup_steps, o_.metrics.progress, log_, compression_, comm_,
      *reducer_, at_.step, &r_, resume ? &adaptive_state : nullptr);
  if (!resume) return;
  if (!states.empty()) {
    const std::string left_out = reducer_->SetCompressorStates(states);
    if (!left_out.empty() && me_ == 0)
      log_.Warning(
          "cann-dist-train train: --resume: compression state '{}', {}; the rest was "
          "restored",
          compression_path_, left_out);
  } else if (me_ == 0 || std::filesystem::exists(compression_path_)) {
    // Rank 0 speaks for the ranks that found no file; a file refused may be this rank's alone.
    log_.Warning("cann-dist-train train: --resume: {} ('{}'): error feedback starts from zero",
                 why_not, compression_path_);
  }
}

TrainResult Trainer::Run() {
  try {
    if (!o_.metrics.timeline.empty()) {
      comm_.Barrier()->Wait();  // the ranks' timelines start together
      timeline_->Start(at_.step);
    }
    loop_start_ = last_progress_ = last_publish_ = Clock::now();
    r_.started_unix = UnixSeconds();
    if (session_ && session_->loop_start_unix == 0) session_->loop_start_unix = UnixSeconds();
    energy_ = std::make_unique<EnergyWindows>(o_.metrics.energy_profiles, o_.local_world_size,
                                              &r_.energy, me_ == 0);
    step_clock_ = Clock::now();
    for (; at_.step < end_step_; ++at_.step) {
      const StepBatch batch = BeginStep();
      const double compute_before = r_.step_time.forward_s + r_.step_time.backward_s;
      const double loss_sum = ComputeGradients(batch);
      EndStep(batch, compute_before, loss_sum);
      const bool last = at_.step + 1 == end_step_;
      if (EvaluateIfDue()) {
        ++at_.step;  // this step is done; every rank saw the same accuracy and stops here
        break;
      }
      if (!o_.checkpoint.dir.empty() && (checkpoints_->Due(at_.step) || last)) Checkpoint();
      if (regroup_due_ && !last) Regroup();
    }
    Finish();
    Publish(true);
  } catch (...) {
    AbortInFlight();
    throw;
  }
  return r_;
}

StepBatch Trainer::BeginStep() {
  StepBatch batch = data_->Next(&at_);
  timeline_->SetStep(at_.step);
  if (session_) {
    session_->current_step = at_.step;
    if (session_->before_step) session_->regroup_requested = session_->before_step(at_.step);
  }
  return batch;
}

double Trainer::ComputeGradients(const StepBatch& batch) {
  // Elastic: batch norm's statistics before the forward, for the snapshot taken after it.
  std::vector<torch::Tensor> buffers_before;
  if (session_)
    for (const auto& b : model_->buffers()) buffers_before.push_back(b.detach().clone());
  double loss_sum = 0;
  const int parts = static_cast<int>(batch.micro.size());
  const ImageDataset& train_set = data_->train_set();
  for (int m = 0; m < parts; ++m) {
    const std::vector<int64_t>& part = batch.micro[static_cast<size_t>(m)];
    Clock::time_point t0 = Clock::now();
    torch::Tensor loss;
    if (!part.empty()) {  // empty: this rank has no samples in a short last step
      // A model that does not announce its parameters (BeforeUse) gets every update first.
      if (!updates_->every_bucket_announced()) updates_->ApplyAll();
      const double in_updates = updates_->wait_seconds() + updates_->optimizer_seconds();
      model_->set_step(at_.step);
      auto [logits, aux] = model_->Forward(Images(train_set, part));
      auto ce = torch::nn::functional::cross_entropy(
          logits, Labels(train_set, part),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
      // Divide by the global batch: the summed gradients are then the global mean's gradient.
      const double samples = static_cast<double>(batch.global_samples);
      loss = ce / samples;
      if (aux.defined())
        loss = loss + o_.model.aux_loss_weight * aux * (static_cast<double>(part.size()) / samples);
      loss_sum += ce.item<double>();
      // The updates forward applied count as communication wait and optimizer time.
      r_.step_time.forward_s +=
          Since(t0) - (updates_->wait_seconds() + updates_->optimizer_seconds() - in_updates);
      timeline_->Span(Timeline::kTraining, "forward", t0, Clock::now(),
                      {{"step", double(at_.step)}});
    }
    updates_->ApplyAll();  // whatever forward did not announce (none of our models)
    if (session_ && m == 0) SnapshotAt(at_, buffers_before);
    steering_->DecideIfDue();
    if (m == parts - 1) reducer_->SetLaunchOrder(updates_->LaunchOrderFor(at_.step));
    reducer_->PrepareForBackward(m == parts - 1);
    if (!part.empty()) {
      auto t1 = Clock::now();
      loss.backward();
      r_.step_time.backward_s += Since(t1);
      timeline_->Span(Timeline::kTraining, "backward", t1, Clock::now(),
                      {{"step", double(at_.step)}});
    }
  }
  return loss_sum;
}

void Trainer::EndStep(const StepBatch& batch, double compute_before, double loss_sum) {
  updates_->BackwardDone(schedule_->At(at_.step));
  BatchBalancer& balancer = data_->balancer();
  balancer.Observe(r_.step_time.forward_s + r_.step_time.backward_s - compute_before,
                   batch.indices.size());
  steering_->AfterBackward(at_.step, end_step_, updates_->wait_seconds(),
                           updates_->optimizer_seconds(),
                           schedule_->At(at_.step) / std::max(1e-30, schedule_->Peak()));
  RecordLoss();         // the previous step's
  if (balance_work_) {  // the speeds summed after the last interval: the split from the next step
    balance_work_->Wait();
    balance_work_.reset();
    if (balancer.Apply(at_.step + 1)) r_.batch_splits.push_back(balancer.history().back());
  }
  const bool warned = checkpoints_->ObserveHealth(Since(step_clock_), at_.step, me_);
  step_clock_ = Clock::now();
  energy_->StepEnded();
  SubmitLoss(loss_sum, batch.global_samples, warned, session_ && session_->regroup_requested);
  if (balancer.IntervalEnded(at_.step))
    balance_work_ = reducer_->SubmitInOrder(true, [&balancer](Communicator& c) {
      return c.Allreduce(balancer.report().data(), balancer.report().size(), DataType::kFloat64,
                         ReduceOp::kSum);
    });
  at_.pos += batch.global_samples;
  r_.samples += static_cast<int64_t>(batch.global_samples);
  ++r_.steps;
  const bool recovered = session_ && session_->pending.active;
  if (!o_.reduction.overlap_next_forward || recovered) Settle();
  if (recovered) RecordRecovery(*session_, at_.step, W_, me_ == 0 ? &log_ : nullptr);
}

void Trainer::SubmitLoss(double loss_sum, size_t samples, bool warned, bool regroup) {
  loss_in_flight_ = {
      at_.step, {loss_sum, warned ? 1.0 : 0.0, regroup ? 1.0 : 0.0}, samples, nullptr};
  loss_in_flight_.work = reducer_->SubmitInOrder(true, [this](Communicator& c) {
    return c.Allreduce(loss_in_flight_.sum, 3, DataType::kFloat64, ReduceOp::kSum,
                       {AllreduceAlgorithm::kRecursiveDoubling});
  });
}

void Trainer::RecordLoss() {
  PendingLoss& l = loss_in_flight_;
  if (!l.work) return;
  auto t = Clock::now();
  l.work->Wait();
  l.work.reset();
  loss_wait_ += Since(t);
  const double mean_loss = l.sum[0] / static_cast<double>(l.samples);
  if (l.sum[1] > 0) checkpoints_->RequestNow();
  if (l.sum[2] > 0) regroup_due_ = true;
  if (!std::isfinite(mean_loss))
    throw Error(ErrorCode::kDiverged, Who(comm_) + ": loss is " + std::to_string(mean_loss) +
                                          " at step " + std::to_string(l.step) + ", " +
                                          schedule_->RateAt(l.step) + ": diverged: lower --lr" +
                                          CompressLessHint(compression_) + schedule_->WarmUpHint() +
                                          "?");
  r_.loss_curve.push_back({l.step, mean_loss});
  r_.final_loss = mean_loss;
  ShowProgress(mean_loss);
  if (o_.metrics.publish && Since(last_publish_) >= o_.metrics.publish_every_s) Publish(false);
}

void Trainer::Publish(bool finished) {
  if (!o_.metrics.publish) return;
  last_publish_ = Clock::now();
  LiveMetrics m;
  m.rank = me_;
  m.world = W_;
  m.worker_id = session_ ? session_->worker_id : me_;
  m.generation = session_ ? session_->generation : 0;
  m.step = finished ? at_.step - 1 : loss_in_flight_.step;
  m.end_step = end_step_;
  m.epoch = at_.epoch;
  m.finished = finished;
  m.unix_time = UnixSeconds();
  m.steps = r_.steps;
  m.samples = r_.samples;
  if (finished) {
    m.wall_s = r_.wall_s;
    m.samples_per_s = r_.samples_per_s;
  } else {
    m.wall_s = session_ ? UnixSeconds() - session_->loop_start_unix - session_->eval_seconds -
                              eval_seconds_
                        : Since(loop_start_) - eval_seconds_;
    m.samples_per_s = r_.samples / std::max(1e-9, m.wall_s);
  }
  m.loss = r_.final_loss;
  m.test_accuracy = r_.test_accuracy;
  const auto& curve = r_.loss_curve;
  m.loss_tail.assign(
      curve.end() - static_cast<std::ptrdiff_t>(std::min(curve.size(), LiveMetrics::kLossTail)),
      curve.end());
  m.eval_curve = r_.eval_curve;
  m.step_time = r_.step_time;
  if (!finished) {
    m.step_time.comm_wait_s = updates_->wait_seconds() + loss_wait_;
    m.step_time.optimizer_s = updates_->optimizer_seconds();
  }
  const ReducerStats& rs = reducer_->stats();
  m.bytes_fp32 = rs.bytes_fp32;
  m.bytes_wire = rs.bytes_wire;
  m.residual_pct = rs.compressed_sq > 0 ? 100 * std::sqrt(rs.residual_sq / rs.compressed_sq) : 0;
  m.overlap_ratio =
      rs.comm_seconds > 0 ? std::clamp(1 - rs.wait_seconds / rs.comm_seconds, 0.0, 1.0) : 0;
  m.bucket_comm_s = rs.bucket_comm_seconds;
  m.bucket_wait_s = rs.bucket_wait_seconds;
  m.compress = r_.compress;
  m.compression_phases = r_.compression_phases;
  m.checkpoints = r_.checkpoints;
  m.recoveries = r_.recoveries;
  m.energy_meter = r_.energy.meter;
  m.energy_j = r_.energy.joules;  // this rank's until Finish sums every rank's
  m.comm = comm_.stats();
  if (priority_) {
    const CommStats p = priority_->stats();
    for (const auto& a : p.allreduce) {
      auto same = std::find_if(m.comm.allreduce.begin(), m.comm.allreduce.end(),
                               [&](const CommStats::Algorithm& b) { return b.name == a.name; });
      if (same == m.comm.allreduce.end()) {
        m.comm.allreduce.push_back(a);
      } else {
        same->ops += a.ops;
        same->bytes += a.bytes;
        same->seconds += a.seconds;
      }
    }
    for (size_t i = 0; i < p.sent_bytes.size() && i < m.comm.sent_bytes.size(); ++i) {
      m.comm.sent_bytes[i] += p.sent_bytes[i];
      m.comm.received_bytes[i] += p.received_bytes[i];
    }
  }
  if (me_ == 0) {
    m.node_of_rank = comm_.layout().node_of_rank;
    m.shares_memory = comm_.shares_memory();
    for (size_t bytes = 1 << 10; bytes <= (size_t{64} << 20); bytes *= 4)
      m.algorithm_by_size.push_back(
          {bytes, AllreduceAlgorithmName(comm_.ResolveAllreduce(bytes / 4, DataType::kFloat32))});
  }
  try {
    o_.metrics.publish(m);
    last_publish_ = Clock::now();  // a slow write does not make the next one due at once
  } catch (const std::exception& e) {
    // Reporting must not end the training: say so at the first failure, and go on.
    last_publish_ = Clock::now();
    if (!publish_failed_)
      log_.Warning(
          "cann-dist-train: {}: could not publish live metrics (the dashboard will not "
          "see this rank; training goes on): {}",
          Who(comm_), e.what());
    publish_failed_ = true;
  }
}

void Trainer::ShowProgress(double mean_loss) {
  const int64_t step = loss_in_flight_.step;
  const bool last = step + 1 == end_step_;
  if (!o_.metrics.progress || me_ != 0 || (Since(last_progress_) < 1.0 && !last)) return;
  last_progress_ = Clock::now();
  const double elapsed = Since(loop_start_) - eval_seconds_;
  const double rate = r_.samples / std::max(1e-9, elapsed);
  const double eta = (end_step_ - step - 1) * (elapsed / std::max<int64_t>(1, r_.steps));
  log_.Progress(fmt::format("step {}/{}  epoch {}  loss {:.4f}  {:.0f} samples/s  ETA {:.0f}s   ",
                            step + 1, end_step_, at_.epoch, mean_loss, rate, eta),
                last);
}

void Trainer::Settle() {
  updates_->ApplyAll();
  RecordLoss();
  // Nothing of ours in flight on any channel: the caller may run collectives from this thread.
  steering_->Wait();
  if (balance_work_) balance_work_->Wait();  // applied after the next step, as without settling
}

bool Trainer::EvaluateIfDue() {
  // A run stopped early by --stop-after (a suspension) is not evaluated at its end.
  const bool final_step = at_.step + 1 == total_steps_;
  const int64_t every = o_.metrics.eval_every;
  if (!((every > 0 && (at_.step + 1) % every == 0) || final_step)) return false;
  Settle();
  BroadcastBuffers(comm_, *model_);  // every rank scores its share with rank 0's statistics
  auto te = Clock::now();
  const double acc = Evaluate(comm_, *model_, data_->test_set());
  r_.eval_curve.push_back({at_.step, acc});
  r_.test_accuracy = acc;
  eval_seconds_ += Since(te);
  const double target = o_.metrics.target_accuracy;
  if (!(target > 0 && acc >= target && r_.time_to_target_s < 0)) return false;
  r_.time_to_target_s = Since(loop_start_) - eval_seconds_;
  return true;
}

void Trainer::Checkpoint() {
  Settle();
  Position next = at_;
  ++next.step;
  checkpoints_->Take(next.step, [&](std::vector<elastic::FloatSpan>* f) {
    return CaptureState(*model_, *opt_, next, o_.seed, f);
  });
  if (!reducer_->compressing()) return;
  steering_->DecideIfDue();  // as before the next backward: the state holds the decision
  WriteStateFile(compression_path_,
                 CaptureCompressionState(next.step, reducer_->CompressorStates(), W_,
                                         reducer_->bucket_elements(), o_.reduction.compress,
                                         steering_->State()),
                 Or(o_.checkpoint.fs));
  comm_.Barrier()->Wait();  // the ranks' compression state of the same step is on disk
}

void Trainer::Regroup() {
  // Every rank saw the request with the same step's loss: end the generation here, the state
  // after this step committed, and re-form with the newcomers.
  Settle();
  Position next = at_;
  ++next.step;
  SnapshotAt(next);
  throw Error(ErrorCode::kAborted, Who(comm_) + ": regroup after step " + std::to_string(at_.step) +
                                       ": worker(s) wait to join");
}

void Trainer::SnapshotAt(const Position& p, const std::vector<torch::Tensor>& buffers_before) {
  std::swap(session_->snapshots[0], session_->snapshots[1]);  // reuse the older copy's tensors
  ElasticSession::Snapshot& s = session_->snapshots[0];
  if (!s.memory) s.memory = std::make_shared<MemorySnapshot>();
  TakeMemorySnapshot(*model_, *opt_, p, s.memory.get(), buffers_before);
  s.step = p.step;
  s.world = W_;
}

void Trainer::Finish() {
  checkpoints_->Finish(&r_);
  Settle();
  steering_->Wait();
  if (balance_work_) balance_work_->Wait();
  r_.step_time.comm_wait_s = updates_->wait_seconds() + loss_wait_;
  r_.step_time.optimizer_s = updates_->optimizer_seconds();
  r_.wall_s = Since(loop_start_) - eval_seconds_;
  r_.eval_s = eval_seconds_;
  if (session_) {  // every generation's time, recoveries included
    session_->eval_seconds += eval_seconds_;
    r_.wall_s = UnixSeconds() - session_->loop_start_unix - session_->eval_seconds;
  }
  r_.samples_per_s = r_.samples / std::max(1e-9, r_.wall_s);
  const ReducerStats& rs = reducer_->stats();
  r_.bucket_comm_s = rs.bucket_comm_seconds;
  r_.bucket_wait_s = rs.bucket_wait_seconds;
  r_.bytes_fp32 = rs.bytes_fp32;
  r_.bytes_wire = rs.bytes_wire;
  r_.residual_pct = rs.compressed_sq > 0 ? 100 * std::sqrt(rs.residual_sq / rs.compressed_sq) : 0;
  r_.direct_reductions = rs.direct_reductions;
  r_.overlap_ratio =
      rs.comm_seconds > 0 ? std::clamp(1 - rs.wait_seconds / rs.comm_seconds, 0.0, 1.0) : 0;
  r_.sync_wait_fraction = r_.wall_s > 0 ? r_.step_time.comm_wait_s / r_.wall_s : 0;
  if (!o_.metrics.timeline.empty()) WriteTimeline(comm_, *timeline_, o_.metrics.timeline);
  BroadcastBuffers(comm_, *model_);  // the last forward moved each rank's statistics its own way
  r_.params_consistent = ParamsConsistent(comm_, *model_);
  energy_->Finish(comm_);  // every rank's energy, on every rank
}

void Trainer::AbortInFlight() noexcept {
  comm_.Abort();
  if (priority_) priority_->Abort();
  WaitIgnoringError(loss_in_flight_.work);
  if (steering_) WaitIgnoringError(*steering_->in_flight());
  WaitIgnoringError(balance_work_);
}

}  // namespace

std::string CheckpointSession(const TrainOptions& o, ElasticSession* session,
                              const ModelFactory& make_model) {
  const ElasticSession::Snapshot& newest = session->snapshots[0];
  if (o.checkpoint.dir.empty() || newest.step < 0 || !newest.memory) return "";
  std::shared_ptr<ClassifierModel> model = make_model ? make_model(o.model) : MakeModel(o.model);
  std::unique_ptr<torch::optim::Optimizer> opt = MakeOptimizer(o.optimizer, *model);
  const MemorySnapshot& mem = *newest.memory;
  ApplyMemorySnapshot(mem, *model, *opt);
  CheckpointSchedule writer(o.checkpoint, true, o.log);
  writer.Take(mem.at.step, [&](std::vector<elastic::FloatSpan>* f) {
    return CaptureState(*model, *opt, mem.at, o.seed, f);
  });
  TrainResult written;
  writer.Finish(&written);
  return written.checkpoint;
}

void LoadSessionData(const TrainOptions& o, ElasticSession* session) {
  if (!session->data)
    session->data = LoadDatasets(o.data, o.seed, "worker " + std::to_string(session->worker_id));
}

TrainResult RunTraining(Communicator& comm, const TrainOptions& o, Communicator* priority,
                        ElasticSession* session, const ModelFactory& make_model) {
  return Trainer(comm, o, priority, session, make_model).Run();
}

}  // namespace cdt::train
