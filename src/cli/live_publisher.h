// The workers' side of the dashboard: each rank's live document (train/live_metrics.h) goes into
// the job's store under `<job>/live/<worker id>`, and each worker registers its id once under
// `<job>/live/worker/<n>` (`<job>/live/workers` counts them), so that `cann-dashboard` can find
// every rank without listing keys (docs/dashboard.md, "Where the dashboard reads").
#pragma once

#include <functional>
#include <string>

#include "cdt/store.h"

namespace cdt::train {
struct LiveMetrics;
}

namespace cdt::cli {

// `store` must outlive the returned function (the worker's session store).
std::function<void(const train::LiveMetrics&)> LivePublisher(Store& store,
                                                             const std::string& job_id);

std::string LiveKey(const std::string& job_id, int worker_id);
std::string LiveWorkersKey(const std::string& job_id);            // the counter
std::string LiveWorkerKey(const std::string& job_id, int64_t n);  // the n-th registered id

}  // namespace cdt::cli
