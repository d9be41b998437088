// Compression advice for `topo-scan --gradient-compress`: for a gradient of a given size on the
// measured cluster, predict each compressor's communication time (from the cost model, with the
// exchange pattern each compressor needs) plus its encode/decode time (measured here by timing a
// plain implementation of its kernel on this rank), and recommend one.
//
// The rule follows the MLSys'22 study "On the utility of gradient compression": compression must
// pay for its encode cost and its accuracy risk. Candidates are ordered from least to most lossy
// (none, fp16, int8, powersgd, topk); with a compute budget (the backward time that can hide
// communication) the least lossy one that fits is chosen; without one, a lossier candidate is
// chosen only when it is predicted at least 20% faster than the current choice.
//
// Approximations, stated in the report: PowerSGD's factors are sized for one square matrix of the
// whole gradient (real layers give somewhat more bytes); top-k sends (value, index) pairs by
// allgather, so its volume grows with the world size.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/cost_model.h"

namespace cdt::topology {

struct CompressionCandidate {
  std::string name;       // "none", "fp16", "int8", "powersgd", "topk"
  std::string setting;    // e.g. "rank 4", "ratio 0.01"
  double wire_bytes = 0;  // bytes each rank hands to the network per step
  double comm_us = 0;     // predicted
  double encode_us = 0;   // measured kernel time, scaled to the gradient size
  double total_us() const { return comm_us + encode_us; }
};

struct CompressionAdvice {
  std::vector<CompressionCandidate> candidates;  // least to most lossy
  int recommended = 0;                           // index into candidates
  std::string reason;
};

struct CompressionAdviceOptions {
  double gradient_bytes = 100e6;            // f32 gradient per step
  std::optional<double> compute_budget_us;  // backward time that can hide communication
  double topk_ratio = 0.01;
  int powersgd_rank = 4;
};

// Encode + decode cost of each compressor's kernel on this rank, in microseconds per f32 element
// (fma: one multiply-add, PowerSGD's unit of work).
struct KernelRates {
  double fp16 = 0, int8 = 0, topk = 0, fma = 0;
};

// Times a plain implementation of each kernel on 16 MiB of f32 (best of three; about 0.1 s in an
// optimised build, far longer under the sanitizers).
KernelRates MeasureKernelRates();

// Builds the advice from kernel rates measured here (MeasureKernelRates) or given: the decision
// itself depends only on the model, the options and the rates.
CompressionAdvice AdviseCompression(const CostModel& model, const CompressionAdviceOptions& o,
                                    const KernelRates& rates);
CompressionAdvice AdviseCompression(const CostModel& model, const CompressionAdviceOptions& o);

}  // namespace cdt::topology
