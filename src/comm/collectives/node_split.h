// How a group divides into nodes, for the two-level (hierarchical) allreduces: nodes ordered by
// their first rank in the group, and the ownership of the P = max ranks-per-node shards the buffer
// is cut into (on node n, shard s belongs to local rank s mod k_n).
#pragma once

#include <algorithm>
#include <map>
#include <vector>

#include "comm/collectives/context.h"

namespace cdt {

struct NodeSplit {
  std::vector<std::vector<int>> nodes;  // group indices per node
  int my_node = 0;
  int my_local = 0;  // this rank's index among its node's
  int k = 1;         // ranks on this node
  int P = 1;         // shards: the most ranks any node has

  NodeSplit(const Group& group, const std::vector<int>& node_of_rank) {
    std::map<int, int> node_index;  // node id -> dense index
    for (int i = 0; i < group.size(); ++i) {
      const int id = node_of_rank[static_cast<size_t>(group.peer(i))];
      auto [it, inserted] = node_index.emplace(id, static_cast<int>(nodes.size()));
      if (inserted) nodes.emplace_back();
      nodes[static_cast<size_t>(it->second)].push_back(i);
    }
    my_node = node_index.at(node_of_rank[static_cast<size_t>(group.peer(group.me))]);
    const std::vector<int>& mine = local();
    k = static_cast<int>(mine.size());
    my_local = static_cast<int>(std::find(mine.begin(), mine.end(), group.me) - mine.begin());
    for (const auto& n : nodes) P = std::max(P, static_cast<int>(n.size()));
  }

  const std::vector<int>& local() const { return nodes[static_cast<size_t>(my_node)]; }
  bool owns(int shard) const { return shard % k == my_local; }
  // The global rank owning `shard` on node `node`.
  int owner(const Group& group, int node, int shard) const {
    const std::vector<int>& n = nodes[static_cast<size_t>(node)];
    return group.peer(n[static_cast<size_t>(shard % static_cast<int>(n.size()))]);
  }
  // The group of shard `shard`'s owners, one per node (this rank's index in it: my_node).
  Group Owners(const Group& group, int shard) const {
    Group inter;
    for (size_t n = 0; n < nodes.size(); ++n) inter.ranks.push_back(owner(group, static_cast<int>(n), shard));
    inter.me = my_node;
    return inter;
  }
};

// Step 2 of every hierarchical allreduce: each shard this rank owns (its node's share of the
// reduction) allreduced among the shard's owners on every node, over TCP — ring for large shards,
// recursive doubling for small; a rank owning several does them in increasing shard order, so
// every wait points to a smaller shard and there is no deadlock. `shard`: P + 1 element offsets.
void AllreduceShardsAcrossNodes(CollectiveContext& ctx, const Group& group, const NodeSplit& split,
                                const ReduceBuffer& buf, const std::vector<size_t>& shard);

}  // namespace cdt
