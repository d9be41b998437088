#include "topology/load_balancer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <queue>
#include <string>

#include "cdt/error.h"
#include "common/median.h"

namespace cdt::topology {

namespace {

class SteadyClock : public StepClock {
 public:
  double NowSeconds() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

double StdDev(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size()));
}

std::vector<double> Times(const std::vector<StepTimeModel>& ranks, const std::vector<int>& batch) {
  std::vector<double> t;
  for (size_t r = 0; r < ranks.size(); ++r) t.push_back(ranks[r].Predict(batch[r]));
  return t;
}

}  // namespace

StepClock& SteadyStepClock() {
  static SteadyClock clock;  // stateless
  return clock;
}

StepTimeModel ProbeStepTime(const std::function<void(int)>& step, StepClock& clock,
                            const StepProbeOptions& o) {
  std::map<int, double> median_at;
  for (int b : o.batch_sizes) {
    if (b < 1)
      throw Error(ErrorCode::kInvalidArgument, "load balancer probe: batch sizes must be >= 1");
    for (int i = 0; i < o.warmup; ++i) step(b);
    std::vector<double> times;
    for (int i = 0; i < std::max(1, o.repeats); ++i) {
      const double start = clock.NowSeconds();
      step(b);
      times.push_back(clock.NowSeconds() - start);
    }
    median_at[b] = Median(times);
  }
  if (median_at.size() < 2)
    throw Error(
        ErrorCode::kInvalidArgument,
        "load balancer probe: needs at least two distinct batch sizes to separate the fixed "
        "cost from the per-sample cost");
  // Least squares of t = fixed + b · per_sample over the per-size medians.
  double n = 0, sb = 0, st = 0, sbb = 0, sbt = 0;
  for (auto [b, t] : median_at) {
    n += 1;
    sb += b;
    st += t;
    sbb += static_cast<double>(b) * b;
    sbt += b * t;
  }
  StepTimeModel m;
  m.per_sample_s = (n * sbt - sb * st) / (n * sbb - sb * sb);
  m.fixed_s = (st - m.per_sample_s * sb) / n;
  // Timing noise can tilt the line below zero; neither cost can be negative.
  m.per_sample_s = std::max(0.0, m.per_sample_s);
  m.fixed_s = std::max(0.0, m.fixed_s);
  return m;
}

BatchSplit ProposeMicroBatches(const std::vector<StepTimeModel>& ranks, int global_batch,
                               int min_per_rank) {
  const int p = static_cast<int>(ranks.size());
  if (p == 0) throw Error(ErrorCode::kInvalidArgument, "load balancer: no ranks");
  if (min_per_rank < 0 || static_cast<long long>(min_per_rank) * p > global_batch)
    throw Error(ErrorCode::kInvalidArgument,
                "load balancer: a global batch of " + std::to_string(global_batch) +
                    " cannot give each of " + std::to_string(p) + " ranks at least " +
                    std::to_string(min_per_rank) + " samples");
  for (int r = 0; r < p; ++r) {
    const StepTimeModel& m = ranks[static_cast<size_t>(r)];
    if (!(m.fixed_s >= 0) || !(m.per_sample_s >= 0) || !std::isfinite(m.fixed_s) ||
        !std::isfinite(m.per_sample_s))
      throw Error(ErrorCode::kInvalidArgument,
                  "load balancer: rank " + std::to_string(r) +
                      " reported an invalid step-time model (negative or not finite)");
  }
  BatchSplit s;
  // Even split: the first global_batch % p ranks take one more.
  std::vector<int> even(static_cast<size_t>(p), global_batch / p);
  for (int r = 0; r < global_batch % p; ++r) ++even[static_cast<size_t>(r)];
  // Greedy: hand out samples one at a time to the rank whose time after taking it is smallest
  // (ties to the lower rank, so every rank computes the same split).
  s.batch.assign(static_cast<size_t>(p), min_per_rank);
  using Entry = std::pair<double, int>;  // time after one more sample, rank
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> next;
  for (int r = 0; r < p; ++r)
    next.push({ranks[static_cast<size_t>(r)].Predict(min_per_rank + 1), r});
  for (long long left = global_batch - static_cast<long long>(min_per_rank) * p; left > 0; --left) {
    auto [t, r] = next.top();
    next.pop();
    const int b = ++s.batch[static_cast<size_t>(r)];
    next.push({ranks[static_cast<size_t>(r)].Predict(b + 1), r});
  }
  const std::vector<double> before = Times(ranks, even);
  s.predicted_s = Times(ranks, s.batch);
  s.stddev_before_s = StdDev(before);
  s.stddev_after_s = StdDev(s.predicted_s);
  s.max_before_s = *std::max_element(before.begin(), before.end());
  s.max_after_s = *std::max_element(s.predicted_s.begin(), s.predicted_s.end());
  return s;
}

BatchSplit BalanceAcrossRanks(Communicator& comm, const StepTimeModel& mine, int global_batch,
                              int min_per_rank) {
  const int p = comm.size();
  std::vector<double> all(2 * static_cast<size_t>(p));
  const double own[2] = {mine.fixed_s, mine.per_sample_s};
  comm.Allgatherv(own, all.data(), std::vector<size_t>(static_cast<size_t>(p), 2),
                  DataType::kFloat64)
      ->Wait();
  std::vector<StepTimeModel> models;
  for (int r = 0; r < p; ++r) models.push_back({all[2 * r], all[2 * r + 1]});
  return ProposeMicroBatches(models, global_batch, min_per_rank);
}

}  // namespace cdt::topology
