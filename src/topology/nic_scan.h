// Network interface facts from sysfs (Linux): what kind of fabric connects this node.
// The sysfs root is a parameter so tests can point it at a fake tree (the outside world).
#pragma once

#include <string>
#include <vector>

namespace cdt::topology {

struct NicInfo {
  std::string name;       // "eth0", "ib0", "lo"
  std::string kind;       // "Loopback", "Ethernet", "InfiniBand", "RoCE", "Other"
  double speed_gbps = 0;  // from .../speed (Mb/s); 0 when unknown (virtual NICs report -1)
  bool up = false;        // operstate "up" (or "unknown", which veth and lo report)
};

// Reads <sysfs_root>/class/net/*/{type,speed,operstate} and, for RDMA devices,
// <sysfs_root>/class/infiniband/*/ports/*/link_layer (InfiniBand vs Ethernet = RoCE).
std::vector<NicInfo> ScanNics(const std::string& sysfs_root = "/sys");

// The fabric between nodes, by preference InfiniBand > RoCE > Ethernet; "Loopback" when the job is
// on one node (or no other interface is up).
std::string ClassifyNetwork(const std::vector<NicInfo>& nics, bool multi_node);
// Fastest reported speed among up interfaces of that kind, 0 if unknown.
double NetworkSpeedGbps(const std::vector<NicInfo>& nics, const std::string& kind);

}  // namespace cdt::topology
