// `cann-dist-train predict` (docs/predict.md): model profile + cluster profile -> samples/h,
// scaling efficiency, sync wait, overlap, failures and recovery, energy, carbon and cost, each
// with the assumptions it rests on; `cann-dist-train assess` (standards/): a finished job's
// level and Green Distributed Index.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/environment.h"

namespace cdt::cli {

struct PredictOptions {
  std::string model, cluster;  // a file, or a name in knowledge_base/{model,cluster}_profiles/
  int batch = 0;               // per rank; 0 = the profile's largest measured batch
  std::string compress = "none";
  bool overlap_next_forward = true;
  std::string algorithm = "auto";
  double samples = 0;        // 0 = one hour of training
  double mtbf_hours = -1;    // node MTBF; < 0 = the cluster profile's
  std::string trace, start;  // carbon trace and the run's start on its clock
  double deadline_hours = 0;
  std::string price_trace;
  double fault_recall = 0.76, fault_precision = 0.46;
  int trials = 200;
  std::string json;
};

struct AssessOptions {
  std::string job, green_report, baseline, json;
};

void AddPredictCommand(CLI::App& app, PredictOptions* o);
int RunPredict(const PredictOptions& o, const Environment& env);

void AddAssessCommand(CLI::App& app, AssessOptions* o);
int RunAssess(const AssessOptions& o);

}  // namespace cdt::cli
