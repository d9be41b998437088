// The topology report: what `topo-scan --json` writes and cann_dist.TopologyMapper.scan()
// returns (docs/topology.md): world size, network (type, measured bandwidth and latency of the
// slowest level, NIC speed), hierarchy, levels with alpha/beta, the allreduce plan per message
// size, NICs, the cache fingerprint — and, when asked, the compression advice for a gradient.
#pragma once

#include <string>

#include "topology/compression_advice.h"
#include "topology/discovery.h"

namespace cdt::topology {

// JSON text (two-space indented). `advice`/`advice_options` null: no "gradient_compress" key.
std::string DiscoveryReportJson(const Discovery& d, int world_size,
                                const CompressionAdvice* advice = nullptr,
                                const CompressionAdviceOptions* advice_options = nullptr);

// The advice alone, as the report's "gradient_compress" object.
std::string CompressionAdviceJson(const CompressionAdvice& advice,
                                  const CompressionAdviceOptions& options);

}  // namespace cdt::topology
