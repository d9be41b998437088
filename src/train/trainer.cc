// The training loop: data, model, optimizer, gradient reducer, checkpoints, metrics.
#include "train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cdt/error.h"
#include "common/unix_time.h"
#include "common/usable_cpus.h"
#include "train/batch_balancer.h"
#include "train/blas_library.h"
#include "train/checkpoint.h"
#include "train/compression_steering.h"
#include "train/elastic_state.h"
#include "train/energy_windows.h"
#include "train/global_sampler.h"
#include "train/gradient_reducer.h"
#include "train/image_dataset.h"
#include "train/lr_schedule.h"
#include "train/models.h"
#include "train/update_scheduler.h"

namespace cdt::train {

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string Who(const Communicator& comm) { return "rank " + std::to_string(comm.rank()); }

// Fashion-MNIST's mean and standard deviation of pixel values in [0, 1].
constexpr float kMean = 0.2860f, kStd = 0.3530f;

torch::Tensor Images(const ImageDataset& d, const std::vector<int64_t>& idx) {
  const int64_t px = d.rows * d.cols;
  auto out = torch::empty({static_cast<int64_t>(idx.size()), 1, d.rows, d.cols}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  for (size_t i = 0; i < idx.size(); ++i) {
    const uint8_t* src = d.pixels.data() + idx[i] * px;
    for (int64_t j = 0; j < px; ++j)
      o[static_cast<int64_t>(i) * px + j] = (src[j] / 255.0f - kMean) / kStd;
  }
  return out;
}

torch::Tensor Labels(const ImageDataset& d, const std::vector<int64_t>& idx) {
  auto out = torch::empty({static_cast<int64_t>(idx.size())}, torch::kInt64);
  int64_t* o = out.data_ptr<int64_t>();
  for (size_t i = 0; i < idx.size(); ++i) o[i] = d.labels[static_cast<size_t>(idx[i])];
  return out;
}

std::vector<torch::Tensor> StateTensors(torch::nn::Module& m) {
  std::vector<torch::Tensor> all = m.parameters();
  for (auto& b : m.buffers()) all.push_back(b);
  return all;
}

// Rank 0's initial parameters and buffers to everyone, in one broadcast.
void BroadcastState(Communicator& comm, torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> all = StateTensors(m);
  int64_t n = 0;
  for (auto& t : all) n += t.numel();
  auto flat = torch::empty({n}, torch::kFloat32);
  int64_t at = 0;
  for (auto& t : all) {
    flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}).to(torch::kFloat32));
    at += t.numel();
  }
  comm.Broadcast(flat.data_ptr<float>(), static_cast<size_t>(n), DataType::kFloat32, 0)->Wait();
  at = 0;
  for (auto& t : all) {
    t.copy_(flat.narrow(0, at, t.numel()).view_as(t));
    at += t.numel();
  }
}

// FNV-1a over every parameter's bytes: equal hashes on all ranks = bit-identical parameters.
bool ParamsConsistent(Communicator& comm, torch::nn::Module& m) {
  uint64_t h = 1469598103934665603ull;
  for (auto& t : StateTensors(m)) {
    auto c = t.contiguous();
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  std::vector<int64_t> all(static_cast<size_t>(comm.size()));
  int64_t mine = static_cast<int64_t>(h);
  comm.Allgatherv(&mine, all.data(), std::vector<size_t>(all.size(), 1), DataType::kInt64)->Wait();
  for (int64_t x : all)
    if (x != all[0]) return false;
  return true;
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainOptions& o,
                                                       torch::nn::Module& m) {
  if (o.optimizer == "sgd")
    return std::make_unique<torch::optim::SGD>(
        m.parameters(),
        torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  if (o.optimizer == "adamw")
    return std::make_unique<torch::optim::AdamW>(
        m.parameters(), torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  throw Error(ErrorCode::kInvalidArgument,
              "unknown optimizer '" + o.optimizer + "' (use sgd or adamw)");
}

// Accuracy on the test set: each rank scores every world-size-th image, the counts are summed.
double Evaluate(Communicator& comm, ClassifierModel& model, const ImageDataset& test) {
  torch::NoGradGuard no_grad;
  double counts[2] = {0, 0};  // correct, seen
  std::vector<int64_t> idx;
  for (int64_t i = comm.rank(); i < test.count; i += comm.size()) idx.push_back(i);
  for (size_t first = 0; first < idx.size(); first += 1000) {
    std::vector<int64_t> part(idx.begin() + static_cast<long>(first),
                              idx.begin() + static_cast<long>(std::min(idx.size(), first + 1000)));
    auto logits = model.Forward(Images(test, part)).first;
    counts[0] += logits.argmax(1).eq(Labels(test, part)).sum().item<double>();
    counts[1] += static_cast<double>(part.size());
  }
  comm.Allreduce(counts, 2, DataType::kFloat64, ReduceOp::kSum)->Wait();
  return counts[1] > 0 ? counts[0] / counts[1] : 0;
}

std::pair<ImageDataset, ImageDataset> SplitDataset(ImageDataset all, int64_t first_count) {
  const size_t px = static_cast<size_t>(all.rows * all.cols);
  ImageDataset a = all, b = all;
  a.count = first_count;
  b.count = all.count - first_count;
  a.pixels.assign(all.pixels.begin(), all.pixels.begin() + static_cast<long>(first_count * px));
  b.pixels.assign(all.pixels.begin() + static_cast<long>(first_count * px), all.pixels.end());
  a.labels.assign(all.labels.begin(), all.labels.begin() + first_count);
  b.labels.assign(all.labels.begin() + first_count, all.labels.end());
  return {std::move(a), std::move(b)};
}

// Splits `n` samples into `parts` contiguous micro-batches differing by at most one.
std::vector<size_t> MicroOffsets(size_t n, int parts) {
  std::vector<size_t> off(static_cast<size_t>(parts) + 1, 0);
  for (int i = 0; i < parts; ++i)
    off[static_cast<size_t>(i) + 1] =
        off[static_cast<size_t>(i)] + n / static_cast<size_t>(parts) +
        (static_cast<size_t>(i) < n % static_cast<size_t>(parts) ? 1 : 0);
  return off;
}

struct Datasets {
  ImageDataset train, test;
};

std::shared_ptr<Datasets> LoadDatasets(const TrainOptions& o, const std::string& who) {
  auto data = std::make_shared<Datasets>();
  if (o.dataset == "synthetic") {
    // One draw split in two, so that the test images share the training images' class patterns.
    const int64_t test_count = std::max<int64_t>(1000, o.synthetic_samples / 6);
    ImageDataset all = SyntheticImages(o.synthetic_samples + test_count, o.seed);
    std::tie(data->train, data->test) = SplitDataset(std::move(all), o.synthetic_samples);
  } else {
    const std::string dir = o.data_dir.empty() ? kFashionMnistDir : o.data_dir;
    try {
      data->train = LoadFashionMnist(dir, true);
      data->test = LoadFashionMnist(dir, false);
    } catch (const Error& e) {
      throw Error(e.code(), who + ": " + e.what());
    }
  }
  return data;
}

}  // namespace

std::string CheckpointSession(const TrainOptions& o, ElasticSession* session) {
  const ElasticSession::Snapshot& newest = session->snapshots[0];
  if (o.checkpoint_dir.empty() || newest.step < 0 || !newest.memory) return "";
  std::shared_ptr<ClassifierModel> model =
      MakeModel({o.model, o.layers, o.width, o.heads, o.experts, o.top_k, o.linear_blocks});
  std::unique_ptr<torch::optim::Optimizer> opt = MakeOptimizer(o, *model);
  const auto& mem = *static_cast<const MemorySnapshot*>(newest.memory.get());
  ApplyMemorySnapshot(mem, *model, *opt);
  CheckpointSchedule writer(o, true);
  writer.Take(
      mem.at.step,
      [&](std::vector<elastic::FloatSpan>* f) { return CaptureState(*model, *opt, mem.at, o, f); },
      1.0);
  TrainResult written;
  writer.Finish(&written);
  return written.checkpoint;
}

void LoadSessionData(const TrainOptions& o, ElasticSession* session) {
  if (!session->data)
    session->data = LoadDatasets(o, "worker " + std::to_string(session->worker_id));
}

TrainResult RunTraining(Communicator& comm, const TrainOptions& o, Communicator* priority,
                        ElasticSession* session) {
  ValidateTrainOptions(o);
  const int W = comm.size(), me = comm.rank();
  torch::set_num_threads(
      o.threads > 0 ? o.threads : std::max(1, UsableCpus() / std::max(1, o.local_world_size)));
  const BlasLibrary blas = LoadedBlas();
  if (me == 0 && blas.reference && !(session && session->generation > 0))
    std::fprintf(stderr, "cann-dist-train train: warning: %s\n", BlasWarning(blas).c_str());

  // Data (loaded once per process: an elastic worker keeps it across generations).
  std::shared_ptr<Datasets> data =
      session ? std::static_pointer_cast<Datasets>(session->data) : nullptr;
  if (!data) data = LoadDatasets(o, Who(comm));
  if (session) session->data = data;
  const ImageDataset& train_set = data->train;
  const ImageDataset& test_set = data->test;

  // Model, identical everywhere: same seed, then rank 0's copy broadcast.
  torch::manual_seed(o.seed);
  ModelOptions mo{o.model, o.layers, o.width, o.heads, o.experts, o.top_k, o.linear_blocks};
  std::shared_ptr<ClassifierModel> model = MakeModel(mo);
  BroadcastState(comm, *model);
  // DGC's momentum correction: the compressor's error feedback keeps the momentum instead.
  const bool momentum_in_compressor =
      o.momentum_correction && o.error_feedback && o.optimizer == "sgd" && o.momentum > 0 &&
      (o.compress == "topk" || o.compress == "randomk" || o.compress == "signsgd");
  TrainOptions optimizer_options = o;
  if (momentum_in_compressor) optimizer_options.momentum = 0;
  std::unique_ptr<torch::optim::Optimizer> opt = MakeOptimizer(optimizer_options, *model);

  TrainResult fresh_result;
  TrainResult& r = session ? session->result : fresh_result;  // elastic: carried across generations
  r.world_size = W;
  r.generation = session ? session->generation : 0;
  r.model = o.model;
  r.blas = blas.name;
  r.blas_path = blas.path;
  r.allocator = o.allocator;
  r.params = 0;
  for (auto& p : model->parameters()) r.params += p.numel();

  BatchBalancer balancer(W, me, o.batch_size, o.balance_batches);
  const int64_t global_batch = static_cast<int64_t>(o.batch_size) * W;
  // A step cannot take more samples than there are; the LR would be scaled for the batch asked.
  // An elastic group that may grow is checked at the size it may reach, before its first step
  // rather than at the regroup that would end it.
  const int most = std::max(W, o.max_world_size);
  const int64_t largest_batch = static_cast<int64_t>(o.batch_size) * most;
  if (largest_batch > train_set.count)
    throw Error(
        ErrorCode::kInvalidArgument,
        Who(comm) + ": --batch-size " + std::to_string(o.batch_size) + " x " +
            (most > W ? "up to " : "") + std::to_string(most) +
            " worker(s) = " + std::to_string(largest_batch) + " samples a step, more than the " +
            std::to_string(train_set.count) + " training samples of " + o.dataset +
            (train_set.count >= most
                 ? "; use --batch-size " + std::to_string(train_set.count / most) + " or less"
                 : "; use fewer workers than samples") +
            (most > W
                 ? " (the group may grow to " + std::to_string(most) + " workers: --nnodes MIN:MAX)"
                 : ""));
  const int64_t steps_per_epoch = (train_set.count + global_batch - 1) / global_batch;
  int64_t total_steps =
      o.steps > 0
          ? o.steps
          : static_cast<int64_t>(std::ceil(o.epochs * static_cast<double>(steps_per_epoch)));
  GlobalSampler sampler(static_cast<size_t>(train_set.count), o.seed);

  Position at;
  if (o.resume && !(session && session->result.steps > 0)) {
    std::string source;
    int64_t found_step = -1;
    const std::string bytes = NewestCheckpoint(o.checkpoint_dir, me == 0, &source, &found_step);
    AgreeOnResumeStep(comm, found_step, source, o.checkpoint_dir);
    if (!bytes.empty()) {
      at = RestoreState(bytes, *model, *opt, o, source);
      r.resumed_from = source;
    } else if (me == 0) {
      std::fprintf(stderr,
                   "cann-dist-train train: --resume: no checkpoint in '%s', starting at step 0\n",
                   o.checkpoint_dir.c_str());
    }
  }
  if (at.global_batch > 0 && at.global_batch != global_batch && o.steps == 0) {
    // Resumed with another global batch (more or fewer workers, another --batch-size): the rest
    // of the run's samples take a different number of steps.
    total_steps = at.step + StepsToFinish(train_set.count, o.epochs, at, global_batch);
    if (me == 0)
      std::fprintf(
          stderr,
          "cann-dist-train train: resumed with global batch %lld (was %lld): %lld steps in all\n",
          static_cast<long long>(global_batch), static_cast<long long>(at.global_batch),
          static_cast<long long>(total_steps));
  }
  at.global_batch = global_batch;
  if (!session || session->result.steps == 0) r.first_step = at.step;
  const bool recovering = session && RestoreCommittedState(comm, *session, *model, *opt, o, &at);
  if (recovering && session->snapshots[0].world != W && o.steps == 0)
    // The world changed: the remaining samples of the run take a different number of steps.
    total_steps = at.step + StepsToFinish(train_set.count, o.epochs, at, global_batch);
  LrSchedule schedule{o.lr,           global_batch, o.lr_reference_batch,
                      o.warmup_steps, total_steps,  o.cosine};
  r.total_steps = total_steps;

  // Buckets: explicit --bucket-mb, else the topology plan's size, else a quarter of the model (at
  // least 256 KiB, at most DDP's 25 MiB) so that even a small model is cut into several buckets
  // that can overlap backward.
  const size_t model_bytes = static_cast<size_t>(r.params) * 4;
  size_t bucket_bytes = std::clamp<size_t>(model_bytes / 4, 256 << 10, 25 << 20);
  r.bucket_source = "a quarter of the model";
  if (o.bucket_mb > 0) {
    bucket_bytes = static_cast<size_t>(o.bucket_mb * 1024 * 1024);
    r.bucket_source = "--bucket-mb";
  } else if (o.planned_bucket_bytes > 0) {
    bucket_bytes = o.planned_bucket_bytes;
    r.bucket_source = "topology plan";
  }
  r.bucket_bytes = bucket_bytes;
  // Compression: fixed, or chosen per interval by the adaptive controller.
  const CompressionSetup compression = MakeCompressionSetup(o, W);
  GradientReducer reducer(comm, priority, model->parameters(), bucket_bytes, compression.factory,
                          o.error_feedback, momentum_in_compressor ? o.momentum : 0.0);
  Timeline timeline(o.timeline.empty() ? 0 : o.timeline_steps);
  reducer.set_timeline(&timeline);
  r.compress = o.compress;
  r.compress_values = o.compress_values;
  // On a resume, this rank's compression state: the residuals and the compressors' own state,
  // and the adaptive controller's, which the steering takes back first (it sets the compressors
  // whose state returns).
  const bool resume_compression = reducer.compressing() && !r.resumed_from.empty();
  const std::string compression_path = CompressionStatePath(o.checkpoint_dir, me);
  std::string why_not;
  std::vector<double> adaptive_state;
  const auto states = resume_compression ? RestoreCompressionState(
                                               compression_path, at.step, reducer.bucket_elements(),
                                               W, o.compress, &why_not, &adaptive_state)
                                         : std::vector<std::vector<float>>();
  CompressionSteering steering(o, compression, comm, reducer, at.step, &r,
                               resume_compression ? &adaptive_state : nullptr);
  UpdateScheduler updates(reducer, *opt, model->parameters());
  updates.LearnLaunchOrders(*model, Images(train_set, {0}));
  if (o.overlap_next_forward)
    model->set_use_hook([&updates](const std::vector<torch::Tensor>& p) { updates.BeforeUse(p); });
  r.buckets = reducer.stats().buckets;
  r.bucket_elements = reducer.bucket_elements();
  if (resume_compression) {
    if (!states.empty()) {
      const std::string left_out = reducer.SetCompressorStates(states);
      if (!left_out.empty() && me == 0)
        std::fprintf(
            stderr,
            "cann-dist-train train: --resume: compression state '%s', %s; the rest was restored\n",
            compression_path.c_str(), left_out.c_str());
    } else if (me == 0 || std::filesystem::exists(compression_path))
      // Rank 0 speaks for the ranks that found no file; a file refused may be this rank's alone.
      std::fprintf(stderr,
                   "cann-dist-train train: --resume: %s ('%s'): error feedback starts from zero\n",
                   why_not.c_str(), compression_path.c_str());
  }
  r.bucket_priority = reducer.bucket_priority();

  // The global loss of a step travels behind its early-layer gradients and is read when the next
  // step has launched its own (or at once without deferral): reading it right away would wait for
  // every bucket and undo the overlap. A diverged loss is therefore reported one step late.
  // It carries the ranks' health warnings along (elastic/health_monitor.h): a warning anywhere
  // makes every rank checkpoint at the same step.
  struct PendingLoss {
    int64_t step = 0;
    double sum[3] = {0, 0, 0};  // loss, ranks whose health monitor warned, regroup requests
    size_t samples = 0;
    std::shared_ptr<Work> work;
  } loss_in_flight;
  CheckpointSchedule checkpoints(o, me == 0);
  bool regroup_due = false;  // elastic: workers wait to join; end this generation after the step
  const int64_t end_step = o.stop_after > 0 ? std::min(total_steps, o.stop_after) : total_steps;
  if (!o.timeline.empty()) {
    comm.Barrier()->Wait();  // the ranks' timelines start together
    timeline.Start(at.step);
  }
  const auto loop_start = Clock::now();
  r.started_unix = UnixSeconds();
  if (session && session->loop_start_unix == 0) session->loop_start_unix = UnixSeconds();
  double eval_seconds = 0, loss_wait = 0;
  auto last_progress = Clock::now();
  auto record_loss = [&] {
    PendingLoss& l = loss_in_flight;
    if (!l.work) return;
    auto t = Clock::now();
    l.work->Wait();
    l.work.reset();
    loss_wait += Since(t);
    const double mean_loss = l.sum[0] / static_cast<double>(l.samples);
    if (l.sum[1] > 0) checkpoints.RequestNow();
    if (l.sum[2] > 0) regroup_due = true;
    if (!std::isfinite(mean_loss))
      throw Error(ErrorCode::kDiverged, Who(comm) + ": loss is " + std::to_string(mean_loss) +
                                            " at step " + std::to_string(l.step) +
                                            " (diverged: lower --lr" + CompressLessHint(o) + "?)");
    r.loss_curve.push_back({l.step, mean_loss});
    r.final_loss = mean_loss;
    const bool last = l.step + 1 == end_step;
    if (o.progress && me == 0 && (Since(last_progress) >= 1.0 || last)) {
      last_progress = Clock::now();
      const double elapsed = Since(loop_start) - eval_seconds;
      const double rate = r.samples / std::max(1e-9, elapsed);
      const double eta = (end_step - l.step - 1) * (elapsed / std::max<int64_t>(1, r.steps));
      std::fprintf(stderr, "\rstep %lld/%lld  epoch %llu  loss %.4f  %.0f samples/s  ETA %.0fs   ",
                   static_cast<long long>(l.step + 1), static_cast<long long>(end_step),
                   static_cast<unsigned long long>(at.epoch), mean_loss, rate, eta);
      if (last) std::fprintf(stderr, "\n");
    }
  };
  // Every parameter current and every loss recorded: before eval, checkpoints and the end.
  std::shared_ptr<Work> balance_work;  // --balance-batches: the ranks' speeds in flight
  auto settle = [&] {
    updates.ApplyAll();
    record_loss();
    // Nothing of ours in flight on any channel: the caller may run collectives from this thread.
    steering.Wait();
    if (balance_work) balance_work->Wait();  // applied after the next step, as without settling
  };
  // On the way out by an exception, collectives still in flight write into this frame's buffers
  // (the step's loss, the interval sums): wait for them (each is bounded by the communicator's
  // timeout, and fails at once on a broken one) before those buffers go.
  struct InFlightGuard {
    std::vector<std::shared_ptr<Work>*> works;
    ~InFlightGuard() {
      for (auto* w : works) WaitIgnoringError(*w);
    }
  } in_flight_guard{{&loss_in_flight.work, steering.in_flight(), &balance_work}};
  // ... and before that (declared after it, so destroyed first), break both channels: whatever a
  // peer still waits for from us fails at once instead of after its timeout, and so does what we
  // wait for above. The group is over either way; an elastic caller builds the next one.
  struct AbortOnUnwind {
    Communicator& comm;
    Communicator* priority;
    int exceptions = std::uncaught_exceptions();
    ~AbortOnUnwind() {
      if (std::uncaught_exceptions() <= exceptions) return;
      comm.Abort();
      if (priority) priority->Abort();
    }
  } abort_on_unwind{comm, priority};

  // Elastic: the state after the previous step, once this step's forward has applied all of it.
  auto snapshot_at = [&](const Position& p) {
    std::swap(session->snapshots[0], session->snapshots[1]);  // reuse the older copy's tensors
    ElasticSession::Snapshot& s = session->snapshots[0];
    if (!s.memory) s.memory = std::make_shared<MemorySnapshot>();
    TakeMemorySnapshot(*model, *opt, p, static_cast<MemorySnapshot*>(s.memory.get()));
    s.step = p.step;
    s.world = W;
  };
  auto snapshot = [&](int micro_batch) {
    if (session && micro_batch == 0) snapshot_at(at);
  };
  EnergyWindows energy(o, &r.energy, me == 0);
  auto step_clock = Clock::now();
  for (; at.step < end_step; ++at.step) {
    if (at.pos >= sampler.dataset_size()) {
      ++at.epoch;
      at.pos = 0;
    }
    timeline.SetStep(at.step);
    if (session) {
      session->current_step = at.step;
      if (session->before_step) session->before_step(at.step);
    }
    const size_t step_samples = sampler.StepSamples(at.pos, balancer.batches());
    const std::vector<int64_t> idx = sampler.Indices(at.epoch, at.pos, balancer.batches(), me);
    const double compute_before = r.step_time.forward_s + r.step_time.backward_s;

    double loss_sum = 0;
    const int parts = std::max(1, std::min<int>(o.accumulate, static_cast<int>(idx.size())));
    const std::vector<size_t> off = MicroOffsets(idx.size(), parts);
    for (int m = 0; m < parts; ++m) {
      std::vector<int64_t> part(idx.begin() + static_cast<long>(off[static_cast<size_t>(m)]),
                                idx.begin() + static_cast<long>(off[static_cast<size_t>(m) + 1]));
      if (!part.empty()) {  // empty: this rank has no samples in a short last step
        auto t0 = Clock::now();
        const double in_updates = updates.wait_seconds() + updates.optimizer_seconds();
        model->set_step(at.step);
        auto [logits, aux] = model->Forward(Images(train_set, part));
        auto ce = torch::nn::functional::cross_entropy(
            logits, Labels(train_set, part),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
        // Divide by the global batch: the summed gradients are then the global mean's gradient.
        auto loss = ce / static_cast<double>(step_samples);
        if (aux.defined())
          loss = loss + o.aux_loss_weight * aux * (static_cast<double>(part.size()) / step_samples);
        loss_sum += ce.item<double>();
        // The updates forward applied count as communication wait and optimizer time.
        r.step_time.forward_s +=
            Since(t0) - (updates.wait_seconds() + updates.optimizer_seconds() - in_updates);
        timeline.Span(Timeline::kTraining, "forward", t0, Clock::now(),
                      {{"step", double(at.step)}});
        updates.ApplyAll();  // whatever forward did not announce (none of our models)
        snapshot(m);
        steering.DecideIfDue();
        if (m == parts - 1) reducer.SetLaunchOrder(updates.LaunchOrderFor(at.step));
        reducer.PrepareForBackward(m == parts - 1);
        auto t1 = Clock::now();
        loss.backward();
        r.step_time.backward_s += Since(t1);
        timeline.Span(Timeline::kTraining, "backward", t1, Clock::now(),
                      {{"step", double(at.step)}});
      } else {
        updates.ApplyAll();
        snapshot(m);
        steering.DecideIfDue();
        if (m == parts - 1) reducer.SetLaunchOrder(updates.LaunchOrderFor(at.step));
        reducer.PrepareForBackward(m == parts - 1);
      }
    }
    updates.BackwardDone(schedule.At(at.step));
    balancer.Observe(r.step_time.forward_s + r.step_time.backward_s - compute_before, idx.size());
    steering.AfterBackward(at.step, end_step, updates.wait_seconds(), updates.optimizer_seconds(),
                           schedule.At(at.step) / std::max(1e-30, schedule.Peak()));
    record_loss();       // the previous step's
    if (balance_work) {  // the speeds summed after the last interval: the split from the next step
      balance_work->Wait();
      balance_work.reset();
      if (balancer.Apply(at.step + 1)) r.batch_splits.push_back(balancer.history().back());
    }
    const bool warned = checkpoints.ObserveHealth(Since(step_clock), at.step, me);
    step_clock = Clock::now();
    energy.StepEnded();
    const bool regroup = session && session->regroup_requested;
    loss_in_flight = {
        at.step, {loss_sum, warned ? 1.0 : 0.0, regroup ? 1.0 : 0.0}, step_samples, nullptr};
    loss_in_flight.work = reducer.SubmitInOrder(true, [&loss_in_flight](Communicator& c) {
      return c.Allreduce(loss_in_flight.sum, 3, DataType::kFloat64, ReduceOp::kSum,
                         {AllreduceAlgorithm::kRecursiveDoubling});
    });
    if (balancer.IntervalEnded(at.step))
      balance_work = reducer.SubmitInOrder(true, [&balancer](Communicator& c) {
        return c.Allreduce(balancer.report().data(), balancer.report().size(), DataType::kFloat64,
                           ReduceOp::kSum);
      });
    at.pos += step_samples;
    r.samples += static_cast<int64_t>(step_samples);
    ++r.steps;
    if (!o.overlap_next_forward || (session && session->pending.active)) settle();
    if (session && session->pending.active) RecordRecovery(*session, at.step, W, me == 0);

    const bool last = at.step + 1 == end_step;
    // A run stopped early by --stop-after (a suspension) is not evaluated at its end.
    const bool final_step = at.step + 1 == total_steps;
    if ((o.eval_every > 0 && (at.step + 1) % o.eval_every == 0) || final_step) {
      settle();
      auto te = Clock::now();
      double acc = Evaluate(comm, *model, test_set);
      r.eval_curve.push_back({at.step, acc});
      r.test_accuracy = acc;
      eval_seconds += Since(te);
      if (o.target_accuracy > 0 && acc >= o.target_accuracy && r.time_to_target_s < 0) {
        r.time_to_target_s = Since(loop_start) - eval_seconds;
        ++at.step;  // this step is done; every rank saw the same accuracy and stops here
        break;
      }
    }
    if (!o.checkpoint_dir.empty() && (checkpoints.Due(at.step) || last)) {
      settle();
      Position next = at;
      ++next.step;
      checkpoints.Take(
          next.step,
          [&](std::vector<elastic::FloatSpan>* f) {
            return CaptureState(*model, *opt, next, o, f);
          },
          Since(loop_start) / std::max<int64_t>(1, r.steps));
      if (reducer.compressing()) {
        steering.DecideIfDue();  // as before the next backward: the state holds the decision
        WriteStateFile(
            compression_path,
            CaptureCompressionState(next.step, reducer.CompressorStates(), W,
                                    reducer.bucket_elements(), o.compress, steering.State()));
        comm.Barrier()->Wait();  // the ranks' compression state of the same step is on disk
      }
    }
    if (regroup_due && !last) {
      // Every rank saw the request with the same step's loss: end the generation here, the
      // state after this step committed, and re-form with the newcomers.
      settle();
      Position next = at;
      ++next.step;
      snapshot_at(next);
      throw Error(ErrorCode::kAborted, Who(comm) + ": regroup after step " +
                                           std::to_string(at.step) + ": worker(s) wait to join");
    }
  }
  checkpoints.Finish(&r);
  settle();
  steering.Wait();
  if (balance_work) balance_work->Wait();
  r.step_time.comm_wait_s = updates.wait_seconds() + loss_wait;
  r.step_time.optimizer_s = updates.optimizer_seconds();
  r.wall_s = Since(loop_start) - eval_seconds;
  r.eval_s = eval_seconds;
  if (session) {  // every generation's time, recoveries included
    session->eval_seconds += eval_seconds;
    r.wall_s = UnixSeconds() - session->loop_start_unix - session->eval_seconds;
  }
  r.samples_per_s = r.samples / std::max(1e-9, r.wall_s);
  const ReducerStats& rs = reducer.stats();
  r.bucket_comm_s = rs.bucket_comm_seconds;
  r.bucket_wait_s = rs.bucket_wait_seconds;
  r.bytes_fp32 = rs.bytes_fp32;
  r.bytes_wire = rs.bytes_wire;
  r.residual_pct = rs.compressed_sq > 0 ? 100 * std::sqrt(rs.residual_sq / rs.compressed_sq) : 0;
  r.direct_reductions = rs.direct_reductions;
  r.overlap_ratio =
      rs.comm_seconds > 0 ? std::clamp(1 - rs.wait_seconds / rs.comm_seconds, 0.0, 1.0) : 0;
  r.sync_wait_fraction = r.wall_s > 0 ? r.step_time.comm_wait_s / r.wall_s : 0;
  if (!o.timeline.empty()) WriteTimeline(comm, timeline, o.timeline);
  r.params_consistent = ParamsConsistent(comm, *model);
  energy.Finish(comm);  // every rank's energy, on every rank
  return r;
}

}  // namespace cdt::train
