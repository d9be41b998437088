// Discovery: what `topo-scan` and `--adaptive-comm` run on every rank. Rank 0 reads its NICs and
// looks for a cached strategy; if there is none (or rescan), every rank takes part in the probes.
// Rank 0's measurements are broadcast, so every rank builds the identical TopologyPlanner.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "topology/link_probe.h"
#include "topology/nic_scan.h"
#include "topology/planner.h"

namespace cdt::topology {

struct DiscoveryOptions {
  std::string cache_dir;  // empty = no cache
  bool rescan = false;    // ignore the cache, probe, and overwrite it
  std::string sysfs_root = "/sys";
  ProbeOptions probe;
};

struct Discovery {
  std::vector<NicInfo> nics;  // rank 0's
  std::string network_type;
  double nic_speed_gbps = 0;
  std::string fingerprint;
  bool from_cache = false;
  std::string cache_note;  // why the cache was or was not used
  ProbeResult probe;
  std::shared_ptr<TopologyPlanner> planner;
};

Discovery Discover(Communicator& comm, const DiscoveryOptions& options);

}  // namespace cdt::topology
