#include "comm/node_arena_setup.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cdt/error.h"
#include "comm/auth.h"
#include "comm/collectives/algorithms.h"

namespace cdt {

namespace {

constexpr size_t kNameBytes = 128;  // the name message: NUL-padded; empty = the leader failed
constexpr char kPrefix[] = "cdt-";

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The job id as it may appear in a file name: [A-Za-z0-9_.] kept, anything else '_', 40 at most.
std::string NamePart(const std::string& job_id) {
  std::string out;
  for (char c : job_id.substr(0, 40))
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') ? c : '_';
  return out.empty() ? "job" : out;
}

// The pid in "cdt-<job>-g<gen>-p<PID>-<hex>", or -1.
pid_t CreatorPid(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash == 0) return -1;
  const size_t p = name.rfind("-p", dash - 1);
  if (p == std::string::npos || p + 2 >= dash) return -1;
  pid_t pid = 0;
  for (size_t i = p + 2; i < dash; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i])) || pid > 10000000) return -1;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid > 0 ? pid : -1;
}

}  // namespace

int RemoveStaleArenas() {
  // A leader unlinks its segment's name once every member mapped it; a name is left only when the
  // leader died inside that window. Its pid is in the name: if no such process exists, the
  // segment is garbage. (A leader in another pid namespace sharing this /dev/shm would look dead
  // from here for the few milliseconds its name exists; its members would then fail to open it
  // and the node would run on TCP, with a warning.)
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    const pid_t pid = CreatorPid(name);
    if (pid <= 0 || (::kill(pid, 0) == 0 || errno != ESRCH)) continue;
    if (::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  return removed;
}

namespace {

// This node's ranks, in rank order.
std::vector<int> LocalRanks(const TcpMesh& mesh) {
  const std::vector<std::string>& hosts = mesh.host_ids();
  std::vector<int> local;
  for (int r = 0; r < mesh.size(); ++r)
    if (hosts[static_cast<size_t>(r)] == hosts[static_cast<size_t>(mesh.rank())])
      local.push_back(r);
  return local;
}

std::unique_ptr<shm::NodeArena> NodeHandshake(TcpMesh& mesh, const NodeArenaOptions& o) {
  const std::vector<int> local = LocalRanks(mesh);
  const int me =
      static_cast<int>(std::find(local.begin(), local.end(), mesh.rank()) - local.begin());
  if (!o.enabled || local.size() < 2) return nullptr;
  const OpLabel label{"shared-memory set-up", 0};
  const int k = static_cast<int>(local.size());
  std::unique_ptr<shm::NodeArena> arena;
  std::string failure;

  // 2-3. The leader creates and names; the others receive the name and attach.
  char name[kNameBytes] = {};
  if (me == 0) {
    try {
      const int stale = RemoveStaleArenas();
      if (stale > 0)
        o.log.Info(
            "cann-dist-train: removed {} shared-memory segment(s) left in /dev/shm by "
            "leaders that no longer run",
            stale);
      const std::string n = "/" + std::string(kPrefix) + NamePart(o.job_id) + "-g" +
                            std::to_string(o.generation) + "-p" + std::to_string(::getpid()) + "-" +
                            Hex(auth::RandomBytes(8));
      shm::Segment seg = shm::Segment::Create(n, shm::NodeArena::BytesFor(k, o.slot_bytes));
      arena = std::make_unique<shm::NodeArena>(
          shm::NodeArena::Create(std::move(seg), 0, local, o.slot_bytes));
      std::strncpy(name, n.c_str(), kNameBytes - 1);
    } catch (const Error& e) {
      failure = e.what();
    }
    std::vector<Transfer> x;
    for (int q = 1; q < k; ++q) x.push_back(Transfer::Send(local[q], name, kNameBytes));
    mesh.Exchange(x.data(), x.size(), label);
  } else {
    Transfer t = Transfer::Recv(local[0], name, kNameBytes);
    mesh.Exchange(&t, 1, label);
    name[kNameBytes - 1] = '\0';
    if (name[0] == '\0') {
      failure = "the leader could not create the segment";
    } else {
      try {
        arena = std::make_unique<shm::NodeArena>(
            shm::NodeArena::Attach(shm::Segment::Open(name), me, local));
      } catch (const Error& e) {
        failure = e.what();
      }
    }
  }

  // 4. Everyone tells everyone whether it holds the arena; then the name goes.
  const char ok = arena ? 1 : 0;
  std::vector<char> theirs(static_cast<size_t>(k), 0);
  std::vector<Transfer> x;
  for (int q = 0; q < k; ++q) {
    if (q == me) continue;
    x.push_back(Transfer::Send(local[q], &ok, 1));
    x.push_back(Transfer::Recv(local[q], &theirs[static_cast<size_t>(q)], 1));
  }
  mesh.Exchange(x.data(), x.size(), label);
  theirs[static_cast<size_t>(me)] = ok;
  if (me == 0 && arena) arena->segment().Unlink();
  int failed = -1;
  for (int q = 0; q < k; ++q)
    if (!theirs[static_cast<size_t>(q)]) failed = q;
  if (failed >= 0) {
    if (me == 0 || failed == me)
      o.log.Warning(
          "cann-dist-train: rank {}: shared memory unavailable to rank {} on this node "
          "({}); this node's collectives run over TCP",
          mesh.rank(), local[static_cast<size_t>(failed)],
          failure.empty() ? "see that rank's log" : failure);
    return nullptr;
  }
  arena->WatchMembers();
  arena->set_spin(o.spin);
  return arena;
}

}  // namespace

NodeArenaSetUp SetUpNodeArena(TcpMesh& mesh, const NodeArenaOptions& o) {
  NodeArenaSetUp out;
  out.arena = NodeHandshake(mesh, o);
  // Every member registered before it said it holds the arena: each can probe the others now.
  const std::string unreadable = out.arena && o.single_copy ? out.arena->ProbeSingleCopy() : "";
  if (!unreadable.empty())
    o.log.Info(
        "cann-dist-train: rank {}: the node's all-to-all copies through shared memory, "
        "not straight between buffers: {}",
        mesh.rank(), unreadable);
  const bool readable = !out.arena || (o.single_copy && unreadable.empty());
  // {chunk, this node shares memory (or needs none), some node has an arena (negated for min),
  //  every rank with an arena can read its node's members (single copy)}
  int64_t agree[4] = {
      static_cast<int64_t>(out.arena ? std::min(out.arena->slot_bytes(), kHierarchicalChunkBytes)
                                     : kHierarchicalChunkBytes),
      out.arena || LocalRanks(mesh).size() < 2 ? 1 : 0, out.arena ? -1 : 0, readable ? 1 : 0};
  if (mesh.size() > 1) {
    Workspace scratch;
    CollectiveContext ctx{mesh, scratch, OpLabel{"shared-memory set-up", 0}};
    AllreduceRecursiveDoubling(ctx, Group::World(mesh.rank(), mesh.size()),
                               ReduceBuffer{agree, 4, DataType::kInt64, ReduceOp::kMin});
  }
  if (out.arena) out.arena->EnableSingleCopy(o.single_copy && agree[3] == 1);
  out.hier_chunk_bytes = static_cast<size_t>(agree[0]);
  out.every_node_shares_memory = agree[1] == 1 && agree[2] == -1;
  return out;
}

}  // namespace cdt
