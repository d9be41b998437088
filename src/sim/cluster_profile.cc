#include "sim/cluster_profile.h"

#include <algorithm>

#include "common/file_system.h"
#include "sim/json_read.h"

namespace cdt::sim {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

topology::LinkLevel ReadLevel(const JsonReader& r, const char* name) {
  topology::LinkLevel l;
  l.name = name;
  l.alpha_us = r.Number("alpha_us", 0, 0, true);
  l.beta_GBps = r.Number("beta_GBps", 1e-9, 0, true);
  l.node_GBps = r.Number("node_GBps", 0, 0);
  return l;
}

std::vector<int> ReadShape(const JsonReader& r) {
  // Bounds: a profile is outside input; a million ranks is beyond any cluster there is.
  const int nodes = static_cast<int>(r.Integer("nodes", 1, 100000, 1, true));
  std::vector<int> shape;
  if (r.Has("ranks_per_node") && r.json().at("ranks_per_node").is_array()) {
    r.Each("ranks_per_node", [&](const JsonReader&, const nlohmann::json& v) {
      const std::optional<int64_t> n = JsonIntegerIn(v, 1, 1024);
      if (!n) r.Fail("ranks_per_node", "expected integers from 1 to 1,024");
      shape.push_back(static_cast<int>(*n));
    });
    if (static_cast<int>(shape.size()) != nodes)
      r.Fail("ranks_per_node", "has " + std::to_string(shape.size()) + " entries for " +
                                   std::to_string(nodes) + " nodes");
  } else {
    shape.assign(nodes, static_cast<int>(r.Integer("ranks_per_node", 1, 1024, 1)));
  }
  return shape;
}

void ReadDevice(const JsonReader& r, const KnowledgeBase& kb, ClusterProfile* c) {
  c->device = r.String("device", "host CPU");
  c->accelerator = Lower(c->device) != "host cpu";
  if (c->accelerator) {
    const green::HardwareProfile* d = nullptr;
    for (const green::HardwareProfile& p : kb.devices)
      if (p.kind != "cpu" && Lower(p.name) == Lower(c->device)) d = &p;
    if (!d) r.Fail("device", "'" + c->device + "' is not in the knowledge base's devices.json");
    const std::string precision = r.String("precision", "16");
    if (precision != "16" && precision != "fp32")
      r.Fail("precision", "expected \"16\" or \"fp32\"");
    c->device_tflops = precision == "16" ? d->peak_tflops_16 : d->peak_tflops_fp32;
    c->device_power_w = d->tdp_w;
    c->device_idle_w = d->idle_w;
  } else {
    c->host_cores = static_cast<int>(r.Integer("host_cores", 1, 1000000, 1, true));
    c->one_host = r.Has("one_host") && r.json().at("one_host").is_boolean() &&
                  r.json().at("one_host").get<bool>();
    c->threads_per_rank = static_cast<int>(r.Integer("threads_per_rank", 0, 1000000, 0));
    // A CPU rank's power: the host's per-core share of the CPU profile's TDP.
    c->device_power_w = r.Number("device_power_w", 0, 0);
    c->device_idle_w = r.Number("device_idle_w", 0, 0);
  }
  c->device_tflops = r.Number("device_tflops", 0, c->device_tflops);
  c->device_power_w = r.Number("device_power_w", 0, c->device_power_w);
}

void ReadLinks(const JsonReader& r, const KnowledgeBase& kb, ClusterProfile* c) {
  topology::CostModel& m = c->links;
  m.shape.ranks_per_node = ReadShape(r);
  if (r.Has("intra")) m.intra = ReadLevel(r.Object("intra"), "intra");
  if (m.shape.max_ranks_per_node() > 1 && !r.Has("intra"))
    r.Fail("intra", "a node with several ranks needs its intra-node level");
  if (r.Has("shm")) {
    m.shared_memory = true;
    m.shm = ReadLevel(r.Object("shm"), "shm");
  }
  if (r.Has("inter")) {
    m.inter = ReadLevel(r.Object("inter"), "inter");
    c->nic = r.String("nic", "given");
  } else if (r.Has("nic")) {
    const NicProfile& n = FindNic(kb, r.String("nic", ""));
    c->nic = n.name;
    m.inter.name = "inter";
    m.inter.alpha_us = n.alpha_us;
    // A node with several ports (one per accelerator, as DGX-class nodes have) multiplies its
    // uplink; the cost model still sees one uplink per node.
    m.inter.beta_GBps = n.gbps * n.efficiency / 8 * r.Number("nic_count", 1, 1);
  } else if (m.shape.nodes() > 1) {
    r.Fail("nic", "several nodes need a NIC (a name in nics.json) or an \"inter\" level");
  }
}

void ReadFaults(const JsonReader& r, const KnowledgeBase& kb, ClusterProfile* c) {
  if (r.Has("faults")) {
    const JsonReader f = r.Object("faults");
    if (f.Has("patterns")) {
      const std::string file = kb.root + "/" + f.String("patterns", "");
      c->node_mtbf_hours =
          NodeMtbfFromFaultPatterns(LocalFileSystem().Read(file, 1 << 20, "fault patterns"), file);
      c->mtbf_source = file;
    }
    if (f.Has("node_mtbf_hours")) {
      c->node_mtbf_hours = f.Number("node_mtbf_hours", 1e-6, 0);
      c->mtbf_source = r.where() + " (node_mtbf_hours)";
    }
  }
  if (r.Has("recovery")) {
    const JsonReader v = r.Object("recovery");
    RecoveryFigures& x = c->recovery;
    x.heartbeat_timeout_s = v.Number("heartbeat_timeout_s", 0, x.heartbeat_timeout_s);
    x.rendezvous_s = v.Number("rendezvous_s", 0, x.rendezvous_s);
    x.connect_s_per_peer = v.Number("connect_s_per_peer", 0, x.connect_s_per_peer);
    x.restart_s = v.Number("restart_s", 0, x.restart_s);
    x.checkpoint_GBps = v.Number("checkpoint_GBps", 1e-9, x.checkpoint_GBps);
    x.hang_share = v.Number("hang_share", 0, x.hang_share);
    if (x.hang_share > 1) v.Fail("hang_share", "expected a share between 0 and 1");
  }
}

}  // namespace

KnowledgeBase LoadKnowledgeBase(const std::string& root) {
  KnowledgeBase kb;
  kb.root = root;
  kb.devices = green::LoadHardwareProfiles(root + "/hardware_profiles/devices.json");
  const std::string path = root + "/hardware_profiles/nics.json";
  const nlohmann::json doc =
      JsonReader::Parse(LocalFileSystem().Read(path, 1 << 20, "NIC profiles"), path);
  JsonReader(doc, path).Each("nics", [&](const JsonReader& n, const nlohmann::json& j) {
    NicProfile p;
    p.name = n.String("name", "", true);
    p.gbps = n.Number("gbps", 1e-6, 0, true);
    p.efficiency = n.Number("efficiency", 0.01, 1);
    p.alpha_us = n.Number("alpha_us", 0, 0, true);
    p.source = n.String("source", "");
    n.Each("match", [&](const JsonReader&, const nlohmann::json& m) {
      if (m.is_string()) p.match.push_back(m.get<std::string>());
    });
    kb.nics.push_back(p);
  });
  return kb;
}

const NicProfile& FindNic(const KnowledgeBase& kb, const std::string& name) {
  const std::string want = Lower(name);
  for (const NicProfile& n : kb.nics)
    if (Lower(n.name) == want) return n;
  for (const NicProfile& n : kb.nics)
    for (const std::string& m : n.match)
      if (want.find(Lower(m)) != std::string::npos) return n;
  std::string names;
  for (const NicProfile& n : kb.nics) names += (names.empty() ? "" : ", ") + n.name;
  throw Error(ErrorCode::kInvalidArgument,
              "no NIC named '" + name + "' in the knowledge base (" + names + ")");
}

ClusterProfile ParseClusterProfile(const std::string& text, const std::string& where,
                                   const KnowledgeBase& kb) {
  const nlohmann::json doc = JsonReader::Parse(text, where);
  const JsonReader r(doc, where);
  if (r.String("format", "") != "cdt-cluster-profile")
    r.Fail("format", "expected \"cdt-cluster-profile\" (docs/predict.md)");
  if (r.Number("version", 1, 1, true) != 1) r.Fail("version", "this build reads version 1");
  ClusterProfile c;
  c.name = r.String("name", where);
  c.source = r.String("source", "");
  ReadLinks(r, kb, &c);
  ReadDevice(r, kb, &c);
  c.node_power_w = r.Number("node_power_w", 0, 0);
  c.pue = r.Number("pue", 1, 1);
  c.price_per_device_hour = r.Number("price_per_device_hour", 0, 0);
  ReadFaults(r, kb, &c);
  return c;
}

double NodeMtbfFromFaultPatterns(const std::string& text, const std::string& where) {
  const nlohmann::json doc = JsonReader::Parse(text, where);
  double rate = 0;
  JsonReader(doc, where).Each("causes", [&](const JsonReader& c, const nlohmann::json&) {
    rate += c.Number("per_node_hour", 0, 0, true);
  });
  if (!(rate > 0)) throw Error(ErrorCode::kInvalidArgument, where + ": causes: no failure rate");
  return 1.0 / rate;
}

}  // namespace cdt::sim
