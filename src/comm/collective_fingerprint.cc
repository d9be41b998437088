#include "comm/collective_fingerprint.h"

#include <cstring>
#include <vector>

#include "cdt/error.h"
#include "cdt/types.h"

namespace cdt {

namespace {
const char* OpKindName(uint8_t op) {
  switch (static_cast<OpKind>(op)) {
    case OpKind::kAllreduce:
      return "allreduce";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kAllgather:
      return "allgather";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kReduce:
      return "reduce";
    case OpKind::kGather:
      return "gather";
    case OpKind::kScatter:
      return "scatter";
    case OpKind::kAlltoall:
      return "alltoall";
  }
  return "?";
}
}  // namespace

std::string DescribeFingerprint(const Fingerprint& f) {
  std::string s = std::string(OpKindName(f.op)) + " #" + std::to_string(f.seq);
  if (f.op == static_cast<uint8_t>(OpKind::kBarrier)) return s;
  s += " " + std::to_string(f.count) + " x " + DataTypeName(static_cast<DataType>(f.dtype));
  if (f.op == static_cast<uint8_t>(OpKind::kAllreduce) ||
      f.op == static_cast<uint8_t>(OpKind::kReduceScatter) ||
      f.op == static_cast<uint8_t>(OpKind::kReduce))
    s += std::string(" ") + ReduceOpName(static_cast<ReduceOp>(f.reduce));
  if (f.root >= 0) s += " root " + std::to_string(f.root);
  return s;
}

void CheckFingerprints(TcpMesh& mesh, const Fingerprint& mine, const OpLabel& label) {
  const int p = mesh.size();
  if (p == 1) return;
  std::vector<Fingerprint> all(static_cast<size_t>(p));
  all[static_cast<size_t>(mesh.rank())] = mine;
  std::vector<Transfer> t;
  for (int r = 0; r < p; ++r) {
    if (r == mesh.rank()) continue;
    t.push_back(Transfer::Send(r, &mine, sizeof mine));
    t.push_back(Transfer::Recv(r, &all[static_cast<size_t>(r)], sizeof(Fingerprint)));
  }
  mesh.Exchange(t.data(), t.size(), label);
  bool same = true;
  for (const auto& f : all) same = same && std::memcmp(&f, &mine, sizeof f) == 0;
  if (same) return;
  std::string table = "ranks submitted different collectives (CDT_DEBUG=collectives):";
  for (int r = 0; r < p; ++r)
    table += "\n  rank " + std::to_string(r) + ": " +
             DescribeFingerprint(all[static_cast<size_t>(r)]) +
             (r == mesh.rank() ? "  <- this process" : "");
  table += "\nevery rank must submit the same collectives, in the same order, with the same sizes";
  throw Error(ErrorCode::kMismatch, table, {mesh.rank(), -1, "", label.name, label.seq});
}

}  // namespace cdt
