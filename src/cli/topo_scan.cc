#include "cli/topo_scan.h"

#include <cstdio>
#include <fstream>
#include <limits>

#include "cdt/error.h"
#include "common/file_io.h"
#include "common/units.h"
#include "topology/compression_advice.h"
#include "topology/discovery_report.h"

namespace cdt::cli {

topology::Discovery DiscoverTopology(Communicator& comm, const TopoScanOptions& o,
                                     const std::string& default_cache_dir) {
  topology::DiscoveryOptions d;
  d.cache_dir =
      o.cache_dir == "none" ? "" : (o.cache_dir.empty() ? default_cache_dir : o.cache_dir);
  d.rescan = o.rescan;
  topology::Discovery r = topology::Discover(comm, d);
  if (comm.rank() == 0) {
    if (r.from_cache)
      std::printf("# topology: %s\n", r.cache_note.c_str());
    else
      std::printf("# topology: probed links in %.2f s%s%s\n", r.probe.seconds,
                  r.cache_note.empty() ? "" : "; ", r.cache_note.c_str());
    std::fflush(stdout);
  }
  return r;
}

int RunTopoScan(Communicator& comm, const TopoScanOptions& o,
                const std::string& default_cache_dir) {
  topology::Discovery d = DiscoverTopology(comm, o, default_cache_dir);
  if (comm.rank() != 0) return 0;
  // The seed's journey command (`topo-scan --adaptive-comm --gradient-compress`) names no sizes.
  std::string defaults;
  if (comm.size() == 1) defaults += "one rank (--nproc-per-node 1: no links to measure); ";
  if (o.gradient_compress && o.gradient_size == TopoScanOptions{}.gradient_size)
    defaults += "--gradient-size " + o.gradient_size + "; ";
  if (o.gradient_compress && o.compute_ms <= 0) defaults += "no --compute-ms; ";
  if (!defaults.empty())
    std::printf("# defaults used: %s\n", defaults.substr(0, defaults.size() - 2).c_str());
  const auto& shape = d.probe.shape;
  const topology::LinkLevel& slow = shape.nodes() > 1 ? d.probe.inter : d.probe.intra;
  std::string rpn;
  for (size_t i = 0; i < shape.ranks_per_node.size(); ++i)
    rpn += (i ? "," : "") + std::to_string(shape.ranks_per_node[i]);
  std::printf("network   : %s, measured %.2f Gbit/s, %.1f us (NIC reports %.1f Gbit/s)\n",
              d.network_type.c_str(), slow.beta_GBps * 8, slow.alpha_us, d.nic_speed_gbps);
  std::printf("hierarchy : %d node(s), ranks per node %s\n", shape.nodes(), rpn.c_str());
  if (d.probe.has_intra)
    std::printf("level     : intra  alpha %8.1f us  beta %7.3f GB/s  node %7.3f GB/s\n",
                d.probe.intra.alpha_us, d.probe.intra.beta_GBps, d.probe.intra.node_GBps);
  if (d.probe.has_inter)
    std::printf("level     : inter  alpha %8.1f us  beta %7.3f GB/s\n", d.probe.inter.alpha_us,
                d.probe.inter.beta_GBps);
  if (d.probe.has_shm)
    std::printf("level     : shm    alpha %8.1f us  beta %7.3f GB/s  (same-node ranks' shared "
                "memory: a barrier, and buffer bytes through the node's copies)\n",
                d.probe.shm.alpha_us, d.probe.shm.beta_GBps);
  std::printf(
      "plan      : allreduce algorithm per message size (predicted time at the range start)\n");
  for (const auto& e : d.planner->plan()) {
    std::string hi =
        e.max_bytes == std::numeric_limits<size_t>::max() ? "..." : FormatBytes(e.max_bytes + 1);
    std::printf("            [%6s, %6s)  %-5s  %10.1f us\n", FormatBytes(e.min_bytes).c_str(),
                hi.c_str(), AllreduceAlgorithmName(e.algorithm), e.predicted_us);
  }
  topology::CompressionAdviceOptions ao;
  topology::CompressionAdvice adv;
  if (o.gradient_compress) {
    ao.gradient_bytes = static_cast<double>(ParseBytes(o.gradient_size, "--gradient-size"));
    if (o.compute_ms > 0) ao.compute_budget_us = o.compute_ms * 1e3;
    adv = topology::AdviseCompression(d.planner->model(), ao);
    std::printf("compress  : f32 gradient of %s per step, compute budget %s\n",
                FormatBytes(static_cast<size_t>(ao.gradient_bytes)).c_str(),
                o.compute_ms > 0 ? (std::to_string(o.compute_ms) + " ms").c_str() : "not given");
    std::printf("            %-9s %-32s %12s %12s %12s %12s\n", "method", "setting", "wire_bytes",
                "comm_ms", "encode_ms", "total_ms");
    for (size_t i = 0; i < adv.candidates.size(); ++i) {
      const auto& c = adv.candidates[i];
      std::printf("          %s %-9s %-32s %12s %12.2f %12.2f %12.2f\n",
                  static_cast<int>(i) == adv.recommended ? "*" : " ", c.name.c_str(),
                  c.setting.c_str(), FormatBytes(static_cast<size_t>(c.wire_bytes)).c_str(),
                  c.comm_us / 1e3, c.encode_us / 1e3, c.total_us() / 1e3);
    }
    const auto& rec = adv.candidates[static_cast<size_t>(adv.recommended)];
    std::printf("            recommended: %s (%s): %s\n", rec.name.c_str(), rec.setting.c_str(),
                adv.reason.c_str());
    std::printf(
        "            (comm predicted by the cost model; encode = this rank's measured kernel"
        " time; powersgd sized as one square matrix)\n");
  }
  if (!o.json.empty())
    WriteFileAtomically(o.json, topology::DiscoveryReportJson(d, comm.size(),
                                                              o.gradient_compress ? &adv : nullptr,
                                                              o.gradient_compress ? &ao : nullptr));
  return 0;
}

}  // namespace cdt::cli
