// Median of a sample (the mean of the middle two for an even count; 0 for none). Used wherever a
// few timings decide something: online autotuning, the load balancer's probe.
#pragma once

#include <algorithm>
#include <vector>

namespace cdt {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace cdt
