#include "topology/nic_scan.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/checked_number.h"

namespace cdt::topology {

namespace fs = std::filesystem;

namespace {

std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The number a sysfs value starts with ("25000", "100 Gb/sec (4X EDR)"), when it lies from 0 to
// max; else 0 (unknown: "-1" of a link that is down, or text that is no speed). Never an infinity
// or a 1e300, which would reach an integer conversion in the strategy fingerprint.
double LeadingNumber(const std::string& text, double max) {
  const std::string_view word = std::string_view(text).substr(0, text.find(' '));
  return ParseNumberIn(word, 0, max).value_or(0);
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
    nic.speed_gbps = LeadingNumber(ReadLine(entry.path() / "speed"), 1e7) / 1000.0;  // Mbit/s
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
      nic.speed_gbps = LeadingNumber(ReadLine(port.path() / "rate"), 1e4);  // "100 Gb/sec (4X EDR)"
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
