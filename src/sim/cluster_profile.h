// ClusterProfile: the machines a prediction is for (docs/predict.md, "Cluster profiles"): how
// many nodes and ranks, the device each rank computes on, the links between ranks as the
// topology cost model's levels, power, price, and the failure and recovery figures. A profile
// names its device and NIC from the knowledge base (knowledge_base/hardware_profiles/) or gives
// its own figures; ParseClusterProfile resolves the names, so the simulator sees numbers only.
#pragma once

#include <string>
#include <vector>

#include "green/hardware_profile.h"
#include "topology/cost_model.h"

namespace cdt::sim {

struct NicProfile {
  std::string name;
  std::vector<std::string> match;
  double gbps = 0;        // line rate per node uplink
  double efficiency = 1;  // share of the line rate a bulk transfer achieves
  double alpha_us = 0;    // one-way small-message latency between nodes
  std::string source;
};

// The figures behind a recovery (docs/predict.md, "Failures"): what the engine does when a worker
// dies, and what a restart-everything launcher (torchrun) does, for comparison.
struct RecoveryFigures {
  double heartbeat_timeout_s = 5;     // a hung rank is detected after this (a dead one at once)
  double rendezvous_s = 0.02;         // the new round: store round trips and the agents' report
  double connect_s_per_peer = 0.002;  // a new communicator: one connection per peer
  double restart_s = 5;               // restart-everything: new processes, data, framework import
  double checkpoint_GBps = 1;         // writing and reading a checkpoint (restart-everything)
  double hang_share = 0.1;            // share of failures that are hangs rather than crashes
};

struct ClusterProfile {
  std::string name, source;
  std::vector<int> ranks_per_node;
  std::string device;        // resolved accelerator, or "host CPU"
  double device_tflops = 0;  // peak of `device` in the model's precision; 0 = use the profile as is
  bool accelerator = false;  // false: ranks compute on the host's CPU cores
  // CPU ranks only: how many cores the ranks share and whether every node shares the same host
  // (an emulated cluster on one machine); threads per rank as `train` sets them (0 = cores /
  // ranks of its node).
  int host_cores = 0;
  bool one_host = false;
  int threads_per_rank = 0;
  topology::CostModel links;  // shape, intra, inter and shm levels
  std::string nic;
  double device_power_w = 0, device_idle_w = 0;  // per rank
  double node_power_w = 0;  // per node beyond its devices (CPUs, memory, NICs, fans)
  double pue = 1.0;
  double price_per_device_hour = 0;  // rental price; 0 = none
  double node_mtbf_hours = 0;        // 0 = failures not modelled
  std::string mtbf_source;           // where the MTBF came from
  RecoveryFigures recovery;

  int world() const { return links.shape.world(); }
  int nodes() const { return links.shape.nodes(); }
};

struct KnowledgeBase {
  std::vector<green::HardwareProfile> devices;
  std::vector<NicProfile> nics;
  std::string root;  // knowledge_base/ folder, for fault-pattern files named by a profile
};

// Reads knowledge_base/hardware_profiles/{devices,nics}.json under `root`.
KnowledgeBase LoadKnowledgeBase(const std::string& root);
const NicProfile& FindNic(const KnowledgeBase& kb, const std::string& name);

// The cluster document ("cdt-cluster-profile", version 1; docs/predict.md). Errors name `where`
// and the field.
ClusterProfile ParseClusterProfile(const std::string& json_text, const std::string& where,
                                   const KnowledgeBase& kb);

// Node MTBF in hours from a fault-pattern file (knowledge_base/fault_patterns/): the sum of its
// causes' rates per node-hour, inverted.
double NodeMtbfFromFaultPatterns(const std::string& json_text, const std::string& where);

}  // namespace cdt::sim
