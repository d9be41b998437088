#include "topology/nic_scan.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace cdt::topology {

namespace fs = std::filesystem;

namespace {

std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// ARPHRD_* values from <linux/if_arp.h>.
std::string KindFromType(const std::string& type) {
  if (type == "772") return "Loopback";
  if (type == "1") return "Ethernet";
  if (type == "32") return "InfiniBand";
  return "Other";
}

}  // namespace

std::vector<NicInfo> ScanNics(const std::string& sysfs_root) {
  std::vector<NicInfo> nics;
  std::error_code ec;
  fs::path net = fs::path(sysfs_root) / "class" / "net";
  for (const auto& entry : fs::directory_iterator(net, ec)) {
    NicInfo nic;
    nic.name = entry.path().filename().string();
    nic.kind = KindFromType(ReadLine(entry.path() / "type"));
    std::string speed = ReadLine(entry.path() / "speed");
    try {
      double mbps = speed.empty() ? 0 : std::stod(speed);
      nic.speed_gbps = mbps > 0 ? mbps / 1000.0 : 0;
    } catch (...) {
      nic.speed_gbps = 0;
    }
    std::string state = ReadLine(entry.path() / "operstate");
    nic.up = state == "up" || state == "unknown";
    nics.push_back(nic);
  }
  // RDMA devices: an Ethernet link layer means RoCE.
  fs::path ib = fs::path(sysfs_root) / "class" / "infiniband";
  for (const auto& dev : fs::directory_iterator(ib, ec)) {
    for (const auto& port : fs::directory_iterator(dev.path() / "ports", ec)) {
      std::string layer = ReadLine(port.path() / "link_layer");
      NicInfo nic;
      nic.name = dev.path().filename().string() + "/" + port.path().filename().string();
      nic.kind = layer == "Ethernet" ? "RoCE" : layer == "InfiniBand" ? "InfiniBand" : "Other";
      std::string rate = ReadLine(port.path() / "rate");  // e.g. "100 Gb/sec (4X EDR)"
      try {
        nic.speed_gbps = rate.empty() ? 0 : std::stod(rate);
      } catch (...) {
        nic.speed_gbps = 0;
      }
      nic.up = ReadLine(port.path() / "state").find("ACTIVE") != std::string::npos;
      nics.push_back(nic);
    }
  }
  std::sort(nics.begin(), nics.end(),
            [](const NicInfo& a, const NicInfo& b) { return a.name < b.name; });
  return nics;
}

std::string ClassifyNetwork(const std::vector<NicInfo>& nics, bool multi_node) {
  if (!multi_node) return "Loopback";
  for (const char* kind : {"InfiniBand", "RoCE", "Ethernet"})
    for (const auto& n : nics)
      if (n.up && n.kind == kind) return kind;
  return "Loopback";
}

double NetworkSpeedGbps(const std::vector<NicInfo>& nics, const std::string& kind) {
  double best = 0;
  for (const auto& n : nics)
    if (n.up && n.kind == kind) best = std::max(best, n.speed_gbps);
  return best;
}

}  // namespace cdt::topology
