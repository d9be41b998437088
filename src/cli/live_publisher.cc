#include "cli/live_publisher.h"

#include <chrono>
#include <memory>

#ifdef CDT_HAVE_TORCH
#include "train/live_metrics.h"
#endif

namespace cdt::cli {

std::string LiveKey(const std::string& job_id, int worker_id) {
  return job_id + "/live/" + std::to_string(worker_id);
}
std::string LiveWorkersKey(const std::string& job_id) { return job_id + "/live/workers"; }
std::string LiveWorkerKey(const std::string& job_id, int64_t n) {
  return job_id + "/live/worker/" + std::to_string(n);
}

#ifdef CDT_HAVE_TORCH
std::function<void(const train::LiveMetrics&)> LivePublisher(Store& store,
                                                             const std::string& job_id) {
  struct State {
    bool registered = false;
    std::chrono::steady_clock::time_point quiet_until{};
  };
  auto st = std::make_shared<State>();
  return [&store, job_id, st](const train::LiveMetrics& m) {
    // Training does not need the store (its host may be gone until the next rendezvous): after a
    // failure, leave it alone for 30 s, as the elastic driver does (elastic/driver.cc), so that a
    // store out of reach costs the training thread one attempt per 30 s, not one per second.
    if (std::chrono::steady_clock::now() < st->quiet_until) return;
    try {
      if (!st->registered) {
        const int64_t n = store.Add(LiveWorkersKey(job_id), 1) - 1;
        store.Set(LiveWorkerKey(job_id, n), std::to_string(m.worker_id));
        st->registered = true;
      }
      store.Set(LiveKey(job_id, m.worker_id), train::LiveMetricsJson(m));
    } catch (...) {
      st->quiet_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      throw;
    }
  };
}
#endif

}  // namespace cdt::cli
