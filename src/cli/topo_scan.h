// `cann-dist-train topo-scan` and the `--adaptive-comm` option of the benchmark: discover the
// cluster (NICs, link probes or the strategy cache), build the planner, report it.
#pragma once

#include <string>

#include "cdt/communicator.h"
#include "topology/discovery.h"

namespace cdt::cli {

struct TopoScanOptions {
  std::string cache_dir;  // "" = the default (~/.cache/cann-dist-train/strategies); "none" = off
  bool rescan = false;
  std::string json;
  // --gradient-compress: recommend a compression setting for a gradient of this size.
  bool gradient_compress = false;
  std::string gradient_size = "100M";
  double compute_ms = 0;  // backward time that can hide communication; 0 = unknown
};

// Runs discovery on every rank; rank 0 logs whether the cache was used.
topology::Discovery DiscoverTopology(Communicator& comm, const TopoScanOptions& o,
                                     const std::string& default_cache_dir);

// The verb: discovery, then rank 0 prints the summary and writes the JSON.
int RunTopoScan(Communicator& comm, const TopoScanOptions& o, const std::string& default_cache_dir);

}  // namespace cdt::cli
