// A finished job's result as `cann-dashboard cluster --replay FILE` reads it
// (dashboard/job_view.h, JobView::Replay): a file anyone may hand the dashboard. Refused with
// cdt::Error or taken; either way the page's state and /metrics must still be produced.
#include "cdt/error.h"
#include "dashboard/job_view.h"
#include "dashboard/prometheus.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cdt::dashboard::JobView view("fuzz");
  try {
    view.Replay(std::string(cdt::fuzz::AsText(data, size)), "fuzz.json", 1e9);
  } catch (const cdt::Error&) {
  }
  (void)view.State(1e9 + 1).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  (void)cdt::dashboard::ExpositionText(view.Metrics(1e9 + 1));
  return 0;
}
