#include "comm/collectives/context.h"

namespace cdt {

Group Group::World(int rank, int size) {
  Group g;
  g.ranks.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) g.ranks[static_cast<size_t>(r)] = r;
  g.me = rank;
  return g;
}

std::vector<size_t> BalancedOffsets(size_t count, int parts) {
  std::vector<size_t> offsets(static_cast<size_t>(parts) + 1, 0);
  size_t base = count / static_cast<size_t>(parts);
  size_t extra = count % static_cast<size_t>(parts);
  for (int i = 0; i < parts; ++i)
    offsets[i + 1] = offsets[i] + base + (static_cast<size_t>(i) < extra ? 1 : 0);
  return offsets;
}

}  // namespace cdt
