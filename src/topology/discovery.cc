#include "topology/discovery.h"

#include "topology/strategy_cache.h"

namespace cdt::topology {

Discovery Discover(Communicator& comm, const DiscoveryOptions& o) {
  Discovery d;
  ClusterShape shape = ShapeOf(comm);
  const bool multi = shape.nodes() > 1;
  d.nics = ScanNics(o.sysfs_root);
  d.network_type = ClassifyNetwork(d.nics, multi);
  d.nic_speed_gbps = NetworkSpeedGbps(d.nics, d.network_type);
  d.fingerprint = Fingerprint(shape, d.network_type, d.nic_speed_gbps, comm.shares_memory());

  // Rank 0 decides from its cache; the decision and the numbers travel by broadcast.
  // hit, intra alpha/beta, inter alpha/beta, node bw, shm level present, shm alpha/beta
  double cached[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  if (comm.rank() == 0 && !o.cache_dir.empty()) {
    if (o.rescan) {
      d.cache_note = "--rescan: probing and overwriting the cache";
    } else if (auto hit = LoadStrategy(o.cache_dir, d.fingerprint, &d.cache_note)) {
      cached[0] = 1;
      cached[1] = hit->intra.alpha_us;
      cached[2] = hit->intra.beta_GBps;
      cached[3] = hit->inter.alpha_us;
      cached[4] = hit->inter.beta_GBps;
      cached[5] = hit->intra.node_GBps;
      cached[6] = hit->has_shm ? 1 : 0;
      cached[7] = hit->shm.alpha_us;
      cached[8] = hit->shm.beta_GBps;
      d.cache_note = "reused " + StrategyPath(o.cache_dir, d.fingerprint) +
                     " (fingerprint matches; probes skipped)";
    }
  }
  comm.Broadcast(cached, 9, DataType::kFloat64, 0)->Wait();
  if (cached[0] == 1) {
    d.from_cache = true;
    d.probe.shape = shape;
    d.probe.has_intra = shape.max_ranks_per_node() > 1;
    d.probe.has_inter = multi;
    d.probe.intra = {"intra", cached[1], cached[2], cached[5]};
    d.probe.inter = {"inter", cached[3], cached[4]};
    d.probe.has_shm = cached[6] == 1;
    d.probe.shm = {"shm", cached[7], cached[8]};
  } else {
    d.probe = ProbeLinks(comm, o.probe);
  }
  CostModel model{shape, d.probe.intra, d.probe.inter};
  model.shared_memory = d.probe.has_shm;
  model.shm = d.probe.shm;
  d.planner = std::make_shared<TopologyPlanner>(model);
  if (comm.rank() == 0 && !o.cache_dir.empty() && !d.from_cache)
    SaveStrategy(o.cache_dir, d.fingerprint, d.probe, d.planner->plan());
  return d;
}

}  // namespace cdt::topology
