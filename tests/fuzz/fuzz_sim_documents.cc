// The simulator's documents (docs/predict.md): a model profile and a cluster profile (the input
// split at its first NUL), simulated when both parse, and the input as a job's result for
// `assess`. Refused with cdt::Error or taken; a taken pair must simulate without a crash.
#include "cdt/error.h"
#include "fuzz_util.h"
#include "sim/assessment.h"
#include "sim/cluster_profile.h"
#include "sim/model_profile.h"
#include "sim/run_simulator.h"

namespace {

// A knowledge base of one accelerator and one NIC, in memory: the fuzzer needs no files.
const cdt::sim::KnowledgeBase& Kb() {
  static const cdt::sim::KnowledgeBase kb = [] {
    cdt::sim::KnowledgeBase k;
    cdt::green::HardwareProfile d;
    d.name = "NVIDIA A100 SXM";
    d.kind = "gpu";
    d.tdp_w = 400;
    d.idle_w = 55;
    d.peak_tflops_16 = 312;
    d.peak_tflops_fp32 = 19.5;
    k.devices.push_back(d);
    k.nics.push_back({"RoCE 200G", {"RoCE 200"}, 200, 0.9, 5, ""});
    k.root = "/nonexistent";
    return k;
  }();
  return kb;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [model_text, cluster_text] = cdt::fuzz::SplitAtNul(data, size);
  try {
    cdt::sim::AssessInputs in;
    in.job_json = model_text;
    in.job_where = "fuzz";
    (void)cdt::sim::Assess(in);
  } catch (const cdt::Error&) {
  }
  cdt::sim::ModelProfile model;
  cdt::sim::ClusterProfile cluster;
  try {
    model = cdt::sim::ParseModelProfile(model_text, "model");
    cluster = cdt::sim::ParseClusterProfile(cluster_text, "cluster", Kb());
  } catch (const cdt::Error&) {
    return 0;
  }
  if (cluster.world() > 4096) return 0;  // the simulation is linear in ranks; keep runs short
  try {
    cdt::sim::RunConfig run;
    run.trials = 3;
    (void)cdt::sim::SimulateRun(model, cluster, {}, run);
  } catch (const cdt::Error&) {
  }
  return 0;
}
