// Collective fingerprints (CDT_DEBUG=collectives): catches the silent stall users hit most often
// with Horovod and DDP — ranks that submit different collectives, dtypes or sizes at the same
// point. Before each collective every rank sends its fingerprint to every other (a 24-byte
// all-to-all) and compares; on any difference all ranks fail with kMismatch and a table of what
// each submitted.
#pragma once

#include <cstdint>
#include <string>

#include "comm/transport/tcp_mesh.h"

namespace cdt {

struct Fingerprint {
  uint64_t seq = 0;
  uint64_t count = 0;  // elements (bytes for send/recv)
  int32_t root = -1;   // broadcast, reduce, gather and scatter root, -1 otherwise
  uint8_t op = 0;      // OpKind
  uint8_t dtype = 0;
  uint8_t reduce = 0;
  uint8_t pad = 0;  // explicit, so the struct has no uninitialised padding on the wire
};
static_assert(sizeof(Fingerprint) == 24, "wire struct without implicit padding");

enum class OpKind : uint8_t {
  kAllreduce = 1,
  kBroadcast,
  kAllgather,
  kReduceScatter,
  kBarrier,
  kSend,
  kRecv,
  kReduce,
  kGather,
  kScatter,
  kAlltoall,  // count 0: each rank's counts are its own
};

std::string DescribeFingerprint(const Fingerprint& f);

// Throws cdt::Error(kMismatch) listing every rank's fingerprint when they differ.
void CheckFingerprints(TcpMesh& mesh, const Fingerprint& mine, const OpLabel& label);

}  // namespace cdt
