// Fault injection (`--inject`, `fault-inject`; docs/elastic.md): fires scripted faults at the
// start of a step, on the worker (or node) they name. What a fault does to the outside world —
// a signal to this process, a node's links down, a sleep, a report to the store — goes through
// FaultActions, which the CLI fills with the real calls and tests with recorders.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cdt/log.h"
#include "elastic/fault_spec.h"

namespace cdt::elastic {

struct FaultActions {
  // kill: SIGKILL to this process; hang: SIGSTOP (`signal` is SIGKILL or SIGSTOP).
  std::function<void(int signal)> signal_self;
  // cut: this node's links down for `seconds`, up again after (detached).
  std::function<void(double seconds)> cut_links;
  // slow: the extra time a step takes.
  std::function<void(double seconds)> sleep;
  // Every fault but slow, before it acts: the store learns what was done to whom and when (a
  // recovery is then timed from the fault itself).
  std::function<void(int worker, const std::string& kind)> report;
  // Where a fired fault is announced (a warning).
  Log log;
};

// The real actions: SIGKILL/SIGSTOP to this process, `ip link set down/up` on every interface but
// lo of this network namespace by a detached shell (needs CAP_NET_ADMIN, as inside
// tools/emulate-cluster's namespaces), a sleep; `log` and `report` as given.
FaultActions SystemFaultActions(Log log,
                                std::function<void(int worker, const std::string& kind)> report);

// Where this worker is: its id (its rank in the first generation), its node and its rank there.
struct FaultTarget {
  int worker_id = 0;
  int node_rank = 0;
  int local_rank = 0;
};

class FaultInjector {
 public:
  using Clock = std::chrono::steady_clock;
  // `start`: where the first step's time is measured from.
  FaultInjector(std::vector<Fault> faults, FaultTarget me, FaultActions actions,
                Clock::time_point start = Clock::now());

  // Faults queued while the job runs (`fault-inject`): throws cdt::Error(kInvalidArgument) naming
  // the bad item, adding none of the spec's faults.
  void Add(const std::string& spec);

  // At the start of `step`: a slow fault in force sleeps its extra time and returns true (nothing
  // else happens at that step: the step's own time is measured between calls, before the fault
  // starts). `now` is the caller's clock (a fake in tests).
  bool Slow(int64_t step, Clock::time_point now);
  // At the start of `step`, after Slow: a cut for this node (its first local rank cuts), then a
  // kill or hang for this worker. Each fault fires once per process: a step run again after a
  // recovery does not repeat it.
  void Fire(int64_t step);

  const std::vector<Fault>& faults() const { return faults_; }

 private:
  std::vector<Fault> faults_;
  std::vector<bool> fired_;
  FaultTarget me_;
  FaultActions act_;
  Clock::time_point last_call_;
  double normal_step_s_ = 0;
  int64_t normal_steps_ = 0;
};

}  // namespace cdt::elastic
