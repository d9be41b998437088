// What the dashboard knows about one job: the newest live document of each of its workers
// (train/live_metrics.h, read from the job's store by the CLI), a short history of the job's
// throughput, the measured topology of its cluster shape (strategy cache), a carbon trace, and
// what was asked of the job through the dashboard. It answers the page (/api/state) and
// Prometheus (/metrics). Thread-safe: the poller writes, the HTTP threads read.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dashboard/prometheus.h"

namespace cdt::dashboard {

// An hourly carbon-intensity series (green/carbon_trace.h, handed over as plain numbers) and how
// the job's wall clock maps onto it: trace hour = (now - offset_s).
struct CarbonSeries {
  std::string source;  // e.g. "CISO 2022 (knowledge_base/carbon_traces/CISO_2022.csv)"
  double first_hour_unix = 0;
  std::vector<double> g_per_kwh;  // one value per hour from first_hour_unix
  double offset_s = 0;
  double budget_g = 0;  // 0 = none
  double pue = 1.0;
};

class JobView {
 public:
  explicit JobView(std::string job_id);

  // A worker's newest live document. Throws cdt::Error(kInvalidArgument) naming the worker when
  // it is not a "cdt-live" version 1 object (the view keeps the previous one).
  void Update(int worker_id, const std::string& document, double now_unix);
  // A finished job from its result (`train --json` / `elastic --json`, docs/training.md), shown
  // as rank 0's final document. Throws cdt::Error(kInvalidArgument) naming `source` when it is
  // not such a result.
  void Replay(const std::string& result_json, const std::string& source, double now_unix);
  void SetTopology(nlohmann::json strategy, std::string source);  // a strategy cache entry
  void SetCarbon(CarbonSeries carbon);
  void SetStore(std::string description);  // where the documents come from, for the page
  void SetStoreError(std::string error);   // "" = reachable
  // Requests made through the dashboard (fault simulation), and refused ones.
  void RecordFault(const std::string& spec, double now_unix);
  void RecordRefusal(const std::string& why, double now_unix);

  // Whether the view is waiting for a topology entry that fits the job's shape: the shape
  // (ranks per node, in node order) once rank 0 has said it, and the entry is not set.
  std::optional<std::vector<int>> ShapeWanted() const;
  // Whether rank 0's final document (`finished`) has arrived.
  bool FinalSeen() const;

  nlohmann::json State(double now_unix) const;
  std::vector<MetricFamily> Metrics(double now_unix) const;

 private:
  struct Worker {
    nlohmann::json doc;
    double received_unix = 0;
  };
  double CarbonAt(double unix) const;  // g/kWh at that wall time; 0 without a trace
  const nlohmann::json* Rank0() const;

  const std::string job_id_;
  mutable std::mutex mu_;
  std::map<int, Worker> workers_;  // by worker id
  struct Point {
    double unix, samples_per_s, loss, energy_j, carbon_g;
    int64_t step, world;
  };
  std::deque<Point> history_;  // rank 0's documents, one per update, the last kHistory
  static constexpr size_t kHistory = 900;
  nlohmann::json topology_;  // null until set
  std::string topology_source_;
  CarbonSeries carbon_;
  double carbon_g_ = 0, energy_seen_j_ = 0;  // integrated from the job's energy over time
  std::string store_, store_error_;
  nlohmann::json events_ = nlohmann::json::array();  // requests and refusals, newest last
  int64_t faults_requested_ = 0, refused_ = 0;
};

}  // namespace cdt::dashboard
