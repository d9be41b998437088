#include "comm/allreduce_autotuner.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "common/units.h"

namespace cdt {

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int AllreduceAutotuner::Key(size_t bytes, DataType dtype) {
  const int log2 = bytes == 0 ? 0 : std::bit_width(bytes) - 1;
  return log2 * 16 + static_cast<int>(dtype);
}

int AllreduceAutotuner::CallsToDecide(int trials, size_t min_bytes, size_t bytes) {
  if (trials <= 0) return 0;
  const size_t by_bytes = bytes == 0 ? 1 : (min_bytes + bytes - 1) / bytes;
  return 2 + 2 * static_cast<int>(std::max<size_t>(static_cast<size_t>(trials), by_bytes));
}

int AllreduceAutotuner::TimedCallsPerCandidate(size_t bytes) const {
  return (CallsToDecide(trials_, min_bytes_, bytes) - 2) / 2;
}

AllreduceAutotuner::Step AllreduceAutotuner::Begin(uint64_t epoch, size_t bytes, DataType dtype,
                                                   AllreduceAlgorithm choice,
                                                   AllreduceAlgorithm runner_up) {
  if (trials_ <= 0 || runner_up == AllreduceAlgorithm::kAuto || runner_up == choice)
    return {choice, false, epoch, -1};
  const int key = Key(bytes, dtype);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = classes_.try_emplace({epoch, key});
  Class& c = it->second;
  if (fresh) {
    c.candidates[0] = choice;
    c.candidates[1] = runner_up;
    c.bytes = bytes;
  }
  if (c.decided) return {c.winner, false, epoch, key};
  // Alternate so that both candidates see the same conditions. The first pair runs untimed: first
  // calls pay for page faults, cold caches and TCP slow start, and an idle shaped link (tc tbf on
  // the emulated cluster) lets its first ~10 ms of traffic through at full speed.
  const int which = c.calls % 2;
  const bool timed = c.calls >= 2;
  ++c.calls;
  return {c.candidates[which], timed, epoch, key};
}

std::optional<std::array<double, 2>> AllreduceAutotuner::End(const Step& step, double seconds) {
  if (!step.trial) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  Class& c = classes_.at({step.epoch, step.key});
  const int which = step.algorithm == c.candidates[0] ? 0 : 1;
  c.seconds[which].push_back(seconds);
  const int need = TimedCallsPerCandidate(c.bytes);
  if (static_cast<int>(c.seconds[0].size()) < need || static_cast<int>(c.seconds[1].size()) < need)
    return std::nullopt;
  return std::array<double, 2>{Median(c.seconds[0]), Median(c.seconds[1])};
}

std::string AllreduceAutotuner::Decide(const Step& step, const std::array<double, 2>& agreed) {
  std::lock_guard<std::mutex> lock(mu_);
  Class& c = classes_.at({step.epoch, step.key});
  const int key = step.key;
  // Ties keep the selector's choice: the model had a reason.
  const int winner = agreed[1] < agreed[0] ? 1 : 0;
  c.winner = c.candidates[winner];
  c.decided = true;
  const size_t lo = size_t{1} << (key / 16);
  char line[256];
  std::snprintf(line, sizeof line,
                "autotune: allreduce %s..%s %s: %s %.3f ms, %s %.3f ms (slowest rank, median of %zu)"
                " -> %s",
                FormatBytes(lo).c_str(), FormatBytes(2 * lo).c_str(),
                DataTypeName(static_cast<DataType>(key % 16)), AllreduceAlgorithmName(c.candidates[0]),
                agreed[0] * 1e3, AllreduceAlgorithmName(c.candidates[1]), agreed[1] * 1e3,
                c.seconds[0].size(),
                AllreduceAlgorithmName(c.winner));
  return line;
}

std::optional<AllreduceAlgorithm> AllreduceAutotuner::Decided(uint64_t epoch, size_t bytes,
                                                              DataType dtype) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = classes_.find({epoch, Key(bytes, dtype)});
  if (it == classes_.end() || !it->second.decided) return std::nullopt;
  return it->second.winner;
}

}  // namespace cdt
