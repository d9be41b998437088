// Output shared by the peer benchmarks: the same table and JSON as `cann-dist-train bench
// allreduce`, so bench/summarize.py can put them side by side.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

struct PeerRow {
  std::string algo;
  size_t bytes;
  double time_us;
};

inline int PeerIters(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((256u << 20) / bytes, 5, 200));
}

inline void PrintPeerTable(const std::vector<PeerRow>& rows, int world, const char* what,
                           const char* json_path) {
  std::printf("# %s allreduce: %d ranks, f32 sum\n", what, world);
  std::printf("%12s %8s %12s %11s %11s\n", "bytes", "algo", "time_us", "algbw_GBps", "busbw_GBps");
  FILE* json = json_path ? std::fopen(json_path, "w") : nullptr;
  if (json)
    std::fprintf(json, "{\"world_size\": %d, \"peer\": \"%s\", \"results\": [\n", world, what);
  for (size_t i = 0; i < rows.size(); ++i) {
    const PeerRow& r = rows[i];
    double algbw = r.bytes / r.time_us / 1e3;
    double busbw = algbw * 2.0 * (world - 1) / world;
    std::printf("%12zu %8s %12.1f %11.3f %11.3f\n", r.bytes, r.algo.c_str(), r.time_us, algbw,
                busbw);
    if (json)
      std::fprintf(json,
                   "  {\"algo\": \"%s\", \"bytes\": %zu, \"time_us\": %.3f, \"algbw_GBps\": %.6f, "
                   "\"busbw_GBps\": %.6f}%s\n",
                   r.algo.c_str(), r.bytes, r.time_us, algbw, busbw,
                   i + 1 < rows.size() ? "," : "");
  }
  if (json) {
    std::fprintf(json, "]}\n");
    std::fclose(json);
  }
}
