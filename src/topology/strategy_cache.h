// Strategy cache: measured link levels and the resulting plan, saved under a topology fingerprint
// so the next start on the same cluster skips the probes (docs/strategy_cache.md, format version
// 1).
//
// The fingerprint holds what is known *before* measuring: network type, NIC speed class, nodes and
// ranks per node. A fabric change that sysfs cannot see (a shaped link, congestion) keeps the
// fingerprint: run `topo-scan --rescan` after such a change.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/link_probe.h"
#include "topology/planner.h"

namespace cdt::topology {

// `shared_memory` (the communicator's same-node ranks share memory) adds ";shm=1": a strategy
// measured over TCP only is not reused where the intra-node steps run in shared memory.
std::string Fingerprint(const ClusterShape& shape, const std::string& network_type,
                        double nic_speed_gbps, bool shared_memory = false);

// Path of the cache file for a fingerprint inside dir.
std::string StrategyPath(const std::string& dir, const std::string& fingerprint);

// Returns the cached measurements when the file exists, parses, has format version 1 and the same
// fingerprint; otherwise nullopt and, in *why, the reason (missing, corrupt, other version ...).
std::optional<ProbeResult> LoadStrategy(const std::string& dir, const std::string& fingerprint,
                                        std::string* why);

// Writes atomically (temporary file + rename). Throws cdt::Error(kIo) naming the file on failure.
void SaveStrategy(const std::string& dir, const std::string& fingerprint, const ProbeResult& probe,
                  const std::vector<PlanEntry>& plan);

}  // namespace cdt::topology
