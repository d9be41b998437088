// Scores the health monitor's failure predictor (src/elastic/health_monitor.h) on generated
// traces of one worker sampled once a second: healthy runs with the noise real jobs have
// (step-time jitter, evaluation pauses, allocation steps, single retransmission bursts), and
// runs that end in a failure after a degradation — a slowing device, a memory leak heading for
// the OOM killer, a flapping link — or without warning (a kill, a power loss). The traces are
// generated, not recorded: they say what the rules catch and what they cannot, not how often
// such failures happen. Prints a Markdown table; usage: failure_prediction [traces] [seed]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "elastic/health_monitor.h"

using namespace cdt::elastic;

namespace {

struct Trace {
  std::string kind;
  double failure_t = -1;  // < 0: healthy
  std::vector<HealthSample> samples;
};

Trace Generate(const std::string& kind, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  std::lognormal_distribution<double> jitter(0, 0.08);
  std::poisson_distribution<int> background(2.0);
  Trace tr;
  tr.kind = kind;
  const double base_step = 0.05 + 0.45 * u(rng);
  const double base_rss = 1.5e9 + 1e9 * u(rng);
  const double limit = 8e9;
  const double fail = kind == "healthy" ? -1 : 300 + 250 * u(rng);
  const double lead = 30 + 150 * u(rng);  // how long the degradation shows before the failure
  tr.failure_t = fail;
  const int length = fail < 0 ? 600 : static_cast<int>(fail);
  double rss = base_rss, retrans = 0;
  for (int t = 0; t < length; ++t) {
    const double into = fail < 0 ? -1 : t - (fail - lead);  // seconds into the degradation
    HealthSample s;
    s.t = t;
    double step = base_step * jitter(rng);
    if (u(rng) < 0.02) step *= 3;  // an evaluation or a GC pause
    if (kind == "slowdown" && into > 0) step *= 1 + 2 * into / lead;
    s.step_time_s = step;
    if (t < 30) rss += 10e6 * u(rng);  // warm-up allocations
    if (u(rng) < 0.01) rss += 100e6;   // a cache grows once
    if (kind == "leak" && into > 0)
      rss = base_rss + (limit - base_rss) * std::min(1.0, into / lead);
    s.rss_bytes = rss + 20e6 * (u(rng) - 0.5);
    retrans += background(rng);
    if (u(rng) < 0.01) retrans += 100;  // one burst
    if (kind == "flapping" && into > 0 && static_cast<int>(into) % 10 < 5)
      retrans += 200 + 100 * u(rng);
    s.tcp_retrans = retrans;
    tr.samples.push_back(s);
  }
  return tr;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 500;
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  const std::vector<std::string> kinds = {"healthy", "slowdown", "leak", "flapping", "sudden"};
  PredictorOptions po;
  po.memory_limit_bytes = 8e9;
  const double horizon = 300;  // a warning counts if a failure follows within 5 minutes
  std::map<std::string, PredictionScore> by_kind;
  PredictionScore all;
  for (int i = 0; i < n; ++i) {
    const std::string& kind = kinds[static_cast<size_t>(i) % kinds.size()];
    Trace tr = Generate(kind, rng);
    FailurePredictor p(po);
    std::vector<HealthWarning> warnings;
    for (const auto& s : tr.samples)
      if (auto w = p.Observe(s)) warnings.push_back(*w);
    ScoreTrace(warnings, tr.failure_t, horizon, &by_kind[kind]);
    ScoreTrace(warnings, tr.failure_t, horizon, &all);
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return -1.0;
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "| traces | failures | predicted (recall) | warnings: true / false | median lead time (s) "
      "|\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const auto& kind : kinds) {
    const PredictionScore& s = by_kind[kind];
    std::printf("| %s | %d | %d (%.0f%%) | %d / %d | %.0f |\n", kind.c_str(), s.failures,
                s.predicted_failures, 100 * s.recall(), s.true_warnings, s.false_warnings,
                median(s.lead_times_s));
  }
  std::printf("| all | %d | %d (%.0f%%) | %d / %d (precision %.0f%%) | %.0f |\n", all.failures,
              all.predicted_failures, 100 * all.recall(), all.true_warnings, all.false_warnings,
              100 * all.precision(), median(all.lead_times_s));
  return 0;
}
