#include "topology/discovery_report.h"

#include <nlohmann/json.hpp>

#include "cdt/allreduce_selector.h"

namespace cdt::topology {
namespace {

nlohmann::json AdviceJson(const CompressionAdvice& adv, const CompressionAdviceOptions& o) {
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : adv.candidates)
    cands.push_back({{"method", c.name},
                     {"setting", c.setting},
                     {"wire_bytes", c.wire_bytes},
                     {"comm_us", c.comm_us},
                     {"encode_us", c.encode_us}});
  const auto& rec = adv.candidates[static_cast<size_t>(adv.recommended)];
  return {{"gradient_bytes", o.gradient_bytes},
          {"compute_budget_us",
           o.compute_budget_us ? nlohmann::json(*o.compute_budget_us) : nlohmann::json(nullptr)},
          {"candidates", cands},
          {"recommended", rec.name},
          {"setting", rec.setting},
          {"reason", adv.reason}};
}

}  // namespace

std::string CompressionAdviceJson(const CompressionAdvice& advice,
                                  const CompressionAdviceOptions& options) {
  return AdviceJson(advice, options).dump(2) + "\n";
}

std::string DiscoveryReportJson(const Discovery& d, int world_size,
                                const CompressionAdvice* advice,
                                const CompressionAdviceOptions* advice_options) {
  const auto& shape = d.probe.shape;
  const LinkLevel& slow = shape.nodes() > 1 ? d.probe.inter : d.probe.intra;
  nlohmann::json plan = nlohmann::json::array();
  for (const auto& e : d.planner->plan())
    plan.push_back({{"min_bytes", e.min_bytes},
                    {"max_bytes", e.max_bytes},
                    {"algorithm", AllreduceAlgorithmName(e.algorithm)},
                    {"predicted_us", e.predicted_us}});
  nlohmann::json levels = nlohmann::json::array();
  if (d.probe.has_intra)
    levels.push_back({{"name", "intra"},
                      {"alpha_us", d.probe.intra.alpha_us},
                      {"beta_GBps", d.probe.intra.beta_GBps},
                      {"node_GBps", d.probe.intra.node_GBps}});
  if (d.probe.has_inter)
    levels.push_back({{"name", "inter"},
                      {"alpha_us", d.probe.inter.alpha_us},
                      {"beta_GBps", d.probe.inter.beta_GBps}});
  if (d.probe.has_shm)
    levels.push_back({{"name", "shm"},
                      {"alpha_us", d.probe.shm.alpha_us},
                      {"beta_GBps", d.probe.shm.beta_GBps}});
  nlohmann::json nics = nlohmann::json::array();
  for (const auto& n : d.nics)
    nics.push_back({{"name", n.name}, {"kind", n.kind}, {"speed_gbps", n.speed_gbps}, {"up", n.up}});
  nlohmann::json doc = {
      {"world_size", world_size},
      {"network",
       {{"type", d.network_type},
        {"bandwidth_gbps", slow.beta_GBps * 8},
        {"latency_us", slow.alpha_us},
        {"nic_speed_gbps", d.nic_speed_gbps}}},
      {"hierarchy", {{"nodes", shape.nodes()}, {"ranks_per_node", shape.ranks_per_node}}},
      {"levels", levels},
      {"plan", plan},
      {"nics", nics},
      {"fingerprint", d.fingerprint},
      {"from_cache", d.from_cache},
      {"probe_s", d.probe.seconds}};
  if (advice && advice_options) doc["gradient_compress"] = AdviceJson(*advice, *advice_options);
  return doc.dump(2) + "\n";
}

}  // namespace cdt::topology
