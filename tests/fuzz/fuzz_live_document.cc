// The workers' live documents as the dashboard reads them from the job's store
// (dashboard/job_view.h, docs/dashboard.md): anything a store holds under those keys. Refused with
// cdt::Error or taken; either way the page's state and /metrics must still be produced.
#include "cdt/error.h"
#include "dashboard/job_view.h"
#include "dashboard/prometheus.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cdt::dashboard::JobView view("fuzz");
  const std::string text(cdt::fuzz::AsText(data, size));
  for (int worker : {0, 1}) {
    try {
      view.Update(worker, text, 1e9);
    } catch (const cdt::Error&) {
    }
  }
  (void)view.State(1e9 + 1).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  (void)cdt::dashboard::ExpositionText(view.Metrics(1e9 + 1));
  (void)view.ShapeWanted();
  return 0;
}
