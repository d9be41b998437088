#include "topology/strategy_cache.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "common/checked_number.h"
#include "common/file_io.h"
#include "common/file_system.h"
#include "common/printable.h"

namespace cdt::topology {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kFormatVersion = 1;

// FNV-1a, enough to name a file after a fingerprint string.
uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// What a cache file may hold (LoadStrategy ignores a file outside these): at most 65,536 ranks
// on a node, a latency below 1,000 s and bandwidths below 1 PB/s.
constexpr int64_t kMaxRanksPerNode = 65536;
constexpr double kMaxAlphaUs = 1e9;
constexpr double kMaxGBps = 1e6;

json LevelJson(const LinkLevel& l) {
  return {{"name", l.name},
          {"alpha_us", l.alpha_us},
          {"beta_GBps", l.beta_GBps},
          {"node_GBps", l.node_GBps}};
}
}  // namespace

std::string Fingerprint(const ClusterShape& shape, const std::string& network_type,
                        double nic_speed_gbps, bool shared_memory) {
  std::string f =
      "v1;net=" + network_type + ";speed_class=" +
      std::to_string(nic_speed_gbps > 0 && std::isfinite(nic_speed_gbps)
                         ? static_cast<int>(std::round(std::log2(nic_speed_gbps)))  // <= 1024
                         : -99) +
      ";nodes=" + std::to_string(shape.nodes()) + ";ranks_per_node=";
  for (size_t i = 0; i < shape.ranks_per_node.size(); ++i)
    f += (i ? "," : "") + std::to_string(shape.ranks_per_node[i]);
  if (shared_memory) f += ";shm=1";
  return f;
}

std::string StrategyPath(const std::string& dir, const std::string& fingerprint) {
  char name[64];
  std::snprintf(name, sizeof name, "strategy-%016llx.json",
                static_cast<unsigned long long>(Fnv1a(fingerprint)));
  return (fs::path(dir) / name).string();
}

std::optional<ProbeResult> LoadStrategy(const std::string& dir, const std::string& fingerprint,
                                        std::string* why) {
  const std::string path = StrategyPath(dir, fingerprint);
  std::optional<std::string> text;
  try {
    text = LocalFileSystem().ReadIfExists(path, kMaxTextFileBytes);
  } catch (const Error& e) {
    *why = std::string(e.what()) + "; probing instead";
    return std::nullopt;
  }
  if (!text) {
    *why = "no cached strategy at " + path;
    return std::nullopt;
  }
  try {
    json doc = json::parse(*text);
    // The version compared as a JSON integer: value<int>() of a 1e300 would be undefined.
    if (doc.value("format", "") != "cdt-strategy" ||
        JsonIntegerIn(doc.value("version", nlohmann::json()), 0, 1 << 30) != kFormatVersion) {
      *why = path + " has another format or version; ignoring it";
      return std::nullopt;
    }
    if (doc.at("fingerprint").get<std::string>() != fingerprint) {
      *why = path + " belongs to another topology; ignoring it";
      return std::nullopt;
    }
    ProbeResult r;
    for (const json& n : doc.at("hierarchy").at("ranks_per_node")) {
      const std::optional<int64_t> ranks = JsonIntegerIn(n, 1, kMaxRanksPerNode);
      if (!ranks)
        throw std::runtime_error("hierarchy.ranks_per_node: expected integers " +
                                 RangeText(1, kMaxRanksPerNode));
      r.shape.ranks_per_node.push_back(static_cast<int>(*ranks));
    }
    for (const auto& l : doc.at("levels")) {
      LinkLevel level{l.at("name").get<std::string>(), l.at("alpha_us").get<double>(),
                      l.at("beta_GBps").get<double>(), l.value("node_GBps", 0.0)};
      if (!(level.alpha_us >= 0 && level.alpha_us <= kMaxAlphaUs) ||
          !(level.beta_GBps > 0 && level.beta_GBps <= kMaxGBps) ||
          !(level.node_GBps >= 0 && level.node_GBps <= kMaxGBps))
        throw std::runtime_error("levels: " + Printable(level.name) +
                                 ": expected alpha_us from 0 to 1e9, beta_GBps above 0 and "
                                 "node_GBps from 0, both at most 1e6");
      if (level.name == "intra") {
        r.intra = level;
        r.has_intra = true;
      } else if (level.name == "inter") {
        r.inter = level;
        r.has_inter = true;
      } else if (level.name == "shm") {
        r.shm = level;
        r.has_shm = true;
      }
    }
    if (!r.has_intra && !r.has_inter) throw std::runtime_error("no levels");
    if (!r.has_intra) r.intra = {"intra", r.inter.alpha_us, r.inter.beta_GBps};
    if (!r.has_inter) r.inter = {"inter", r.intra.alpha_us, r.intra.beta_GBps};
    return r;
  } catch (const std::exception& e) {
    *why = path + " is corrupt (" + e.what() + "); ignoring it and probing again";
    return std::nullopt;
  }
}

void SaveStrategy(const std::string& dir, const std::string& fingerprint, const ProbeResult& probe,
                  const std::vector<PlanEntry>& plan) {
  json levels = json::array();
  if (probe.has_intra) levels.push_back(LevelJson(probe.intra));
  if (probe.has_inter) levels.push_back(LevelJson(probe.inter));
  if (probe.has_shm) levels.push_back(LevelJson(probe.shm));
  json entries = json::array();
  for (const auto& e : plan)
    entries.push_back({{"min_bytes", e.min_bytes},
                       {"max_bytes", e.max_bytes},
                       {"algorithm", AllreduceAlgorithmName(e.algorithm)},
                       {"predicted_us", e.predicted_us}});
  json doc = {{"format", "cdt-strategy"},
              {"version", kFormatVersion},
              {"fingerprint", fingerprint},
              {"hierarchy",
               {{"nodes", probe.shape.nodes()}, {"ranks_per_node", probe.shape.ranks_per_node}}},
              {"levels", levels},
              {"plan", entries}};
  LocalFileSystem().WriteAtomically(StrategyPath(dir, fingerprint), doc.dump(2) + "\n", 0644);
}

}  // namespace cdt::topology
