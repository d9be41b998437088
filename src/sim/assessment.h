// `cann-dist-train assess`: a finished job's maturity level and Green Distributed Index, as
// standards/DISTRIBUTED_TRAINING_STANDARD.md defines them, from the JSON the job wrote (`train`
// or `elastic --json`), optionally with its carbon report (`green --report-dir`'s
// green_report.json) and a one-rank run of the same model for the scaling baseline.
#pragma once

#include <string>
#include <vector>

namespace cdt::sim {

struct Criterion {
  int level = 0;
  std::string name;
  bool met = false;
  std::string evidence;  // the measured value it was judged on, or what is missing
};

struct Assessment {
  int level = 0;  // highest L whose criteria, and those of every level below, are met
  std::vector<Criterion> criteria;
  // The index's terms, each in [0, 1], and how each was obtained.
  double scaling_efficiency = 0;
  std::string scaling_basis;
  double fault_tolerance = 0;
  std::string fault_basis;
  double carbon_reduction = 0;
  std::string carbon_basis;
  double green_distributed_index = 0;  // the product of the three
};

struct AssessInputs {
  std::string job_json, job_where;            // required
  std::string green_json, green_where;        // "" = no carbon report
  std::string baseline_json, baseline_where;  // "" = no one-rank baseline
};

// Throws kInvalidArgument naming the file and field when a document is not what it should be.
Assessment Assess(const AssessInputs& in);
std::string AssessmentJson(const Assessment& a);

}  // namespace cdt::sim
