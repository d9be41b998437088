// AllreduceRules: a user's fixed choices that override the selector, in the spirit of Open MPI's
// coll_tuned dynamic rules file and NCCL's tuner-plugin CSV. Format (docs/allreduce_rules.md):
//
//   # cann-dist-train allreduce rules v1
//   # collective  min_bytes  max_bytes  algorithm  [nodes]  [ranks]
//   allreduce     0          64K        rd
//   allreduce     64K        *          hier       2        4
//
// min_bytes is inclusive, max_bytes exclusive, `*` matches anything; the first matching line
// wins; sizes with no matching line go to the selector (planner or fixed thresholds) as usual.
// Precedence for an allreduce with algorithm kAuto: CDT_ALLREDUCE_ALGO, then these rules, then
// the selector with online autotuning.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cdt/types.h"

namespace cdt {

struct AllreduceRule {
  size_t min_bytes = 0;
  std::optional<size_t> max_bytes;  // exclusive; nullopt = unbounded
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  std::optional<int> nodes;  // match only this many nodes
  std::optional<int> ranks;  // match only this world size
  int line = 0;              // where it came from, for reports
};

class AllreduceRules {
 public:
  // Parses `text`; errors name `source` and the line (kInvalidArgument).
  static AllreduceRules Parse(const std::string& text, const std::string& source);
  // Reads and parses a file; a missing or unreadable file is kInvalidArgument naming it.
  static AllreduceRules Load(const std::string& path);

  // The algorithm of the first rule matching, if any.
  std::optional<AllreduceAlgorithm> Match(size_t bytes, int nodes, int world_size) const;

  const std::vector<AllreduceRule>& rules() const { return rules_; }
  const std::string& source() const { return source_; }

 private:
  std::vector<AllreduceRule> rules_;
  std::string source_;
};

}  // namespace cdt
