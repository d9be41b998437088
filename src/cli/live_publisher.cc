#include "cli/live_publisher.h"

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
  auto registered = std::make_shared<bool>(false);
  return [&store, job_id, registered](const train::LiveMetrics& m) {
    if (!*registered) {
      const int64_t n = store.Add(LiveWorkersKey(job_id), 1) - 1;
      store.Set(LiveWorkerKey(job_id, n), std::to_string(m.worker_id));
      *registered = true;
    }
    store.Set(LiveKey(job_id, m.worker_id), train::LiveMetricsJson(m));
  };
}
#endif

}  // namespace cdt::cli
