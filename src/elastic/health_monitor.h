// Health monitoring and failure prediction for elastic jobs (docs/elastic.md, "Health").
//
// What a node can observe cheaply: its workers' step times, their resident memory, the kernel's
// TCP retransmission counter (/proc/net/snmp), disk activity (/proc/diskstats: it has no error
// counter — busy time is what it offers) and temperatures where sysfs exposes thermal zones
// (this machine has none; the reader says so rather than inventing a value).
//
// The predictor turns a stream of samples into warnings. Its honest use is cheap insurance:
// published GPU-failure predictors reach 46–85% precision (ByteDance, SYSTOR'23), so a warning
// triggers an immediate checkpoint, not a migration. Three rules, each against the worker's own
// baseline (the median of its first samples):
//   * slowdown — the step time's exponential moving average stays above `slow_factor` × baseline
//     for `slow_patience` samples (a throttling or failing device, a straggler);
//   * memory — a least-squares line through the recent resident-memory samples reaches
//     `memory_limit_bytes` within `memory_horizon_s` (a leak heading for the OOM killer);
//   * network — TCP retransmissions per second above `retrans_per_s` in `retrans_patience`
//     consecutive samples (a flapping or failing link).
// Evaluated on generated degradation traces by bench/run_failure_prediction.sh.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace cdt::elastic {

struct HealthSample {
  double t = 0;               // seconds (any origin, increasing)
  double step_time_s = 0;     // the last step's duration (0 = none this interval)
  double rss_bytes = 0;       // resident memory of the worker
  double tcp_retrans = 0;     // cumulative TCP RetransSegs of the host
  double temperature_c = -1;  // hottest thermal zone; < 0 = not available
};

struct PredictorOptions {
  int baseline_samples = 20;
  double slow_factor = 1.5;
  int slow_patience = 5;
  double ewma_alpha = 0.3;
  double memory_limit_bytes = 0;  // 0 = memory rule off
  double memory_horizon_s = 60;
  int memory_window = 20;
  double retrans_per_s = 50;
  int retrans_patience = 3;
  double temperature_limit_c = 90;
};

struct HealthWarning {
  double t = 0;
  std::string rule;    // slowdown | memory | network | temperature
  std::string detail;  // what was measured against what
};

class FailurePredictor {
 public:
  explicit FailurePredictor(PredictorOptions options = {}) : o_(options) {}
  // Feeds one sample; returns a warning when a rule fires (each rule fires once until it has
  // been quiet for a baseline's worth of samples).
  std::optional<HealthWarning> Observe(const HealthSample& s);

 private:
  PredictorOptions o_;
  std::vector<double> first_steps_;
  double baseline_ = 0, ewma_ = 0;
  int slow_run_ = 0, net_run_ = 0;
  std::deque<std::pair<double, double>> rss_;  // (t, bytes)
  std::optional<HealthSample> last_;
  struct Armed {
    bool fired = false;
    int quiet = 0;
  } slow_, memory_, network_, heat_;
  std::optional<HealthWarning> Fire(Armed& a, bool condition, const HealthWarning& w);
};

// Readers of this host's counters. Each returns nullopt when the source does not exist here.
std::optional<double> ReadTcpRetransSegs(const std::string& snmp_path = "/proc/net/snmp");
std::optional<double> ReadResidentBytes(int pid, const std::string& proc = "/proc");
std::optional<double> ReadMaxTemperatureC(const std::string& thermal = "/sys/class/thermal");
// Sum of the "time spent doing I/Os" (ms) over whole disks; diskstats has no error counter.
std::optional<double> ReadDiskBusyMs(const std::string& diskstats = "/proc/diskstats");

// Scoring a predictor against labelled traces: a warning is a true positive when a failure
// follows it within `horizon_s`; recall counts failures with at least one such warning before
// them; lead time is failure time - first true warning.
struct PredictionScore {
  int true_warnings = 0, false_warnings = 0, failures = 0, predicted_failures = 0;
  std::vector<double> lead_times_s;
  double precision() const {
    return true_warnings + false_warnings > 0
               ? double(true_warnings) / (true_warnings + false_warnings)
               : 0;
  }
  double recall() const { return failures > 0 ? double(predicted_failures) / failures : 0; }
};
// Adds one trace's outcome: its warnings, and its failure time (< 0 = a healthy trace).
void ScoreTrace(const std::vector<HealthWarning>& warnings, double failure_t, double horizon_s,
                PredictionScore* score);

}  // namespace cdt::elastic
