// NodeArena: the memory the ranks of one node share for their collectives (issue 32) — per member,
// two slots (double buffering) that every other member can read, and a barrier. This is the
// shape of Open MPI's coll/sm and xhc components and of MPICH's shared-memory collectives: a rank
// copies its data in once, and the reduction reads every member's slot in place, so a rank's
// slice is reduced straight from the others' data with no message in between.
//
// Layout in its shm::Segment (offsets from the start, 4 KiB aligned where it matters):
//   header      magic, members, slot_bytes; abort word (0, or 1 + who aborted) and its reason;
//               bell (the futex word every sleeping waiter sleeps on) and the count of sleepers
//   member[i]   one cache line each: the last barrier step member i arrived at, its pid, the
//               inode of its pid namespace and where the segment is mapped in its process
//   slots       2 sets x members x slot_bytes
//
// Barrier: Arrive(step) stores the member's step (seq_cst) and rings the bell only if someone
// sleeps; WaitAll(step) spins with sched_yield for `spin` (ranks usually outnumber cores here),
// then sleeps on the bell in slices of at most 50 ms. Between slices it asks the kernel whether
// the members it waits for still exist (a pidfd of each, opened at set-up when the member lives in
// this pid namespace; a pidfd is readable once its process has exited), so a killed peer fails
// the wait with kPeerLost naming it within ~50 ms, a stopped one with kTimeout at the deadline,
// and Abort() — from any thread of any member — ends every wait at once with the reason, code and
// peer the aborting member gave (kAborted for a plain Abort).
//
// Thread-safety: one thread per member uses the slots and the barrier (the communicator's); Abort
// may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "comm/transport/shm_segment.h"

namespace cdt::shm {

class NodeArena {
 public:
  // Limits of a layout, checked wherever one comes from outside (options, the environment, a
  // segment's header): anything beyond is refused rather than rounded or wrapped.
  static constexpr size_t kMaxSlotBytes = size_t{1} << 30;  // 1 GiB
  static constexpr int kMaxMembers = 4096;

  // Bytes of the segment an arena of `members` members and `slot_bytes` slots takes; nullopt if
  // either is outside 1..kMaxMembers / 1..kMaxSlotBytes (so no size computed here can wrap).
  static std::optional<size_t> CheckedBytesFor(int64_t members, uint64_t slot_bytes);
  // The same, throwing cdt::Error(kInvalidArgument) naming both numbers and the limits.
  static size_t BytesFor(int members, size_t slot_bytes);

  // member 0: lays a new arena out in `segment` (zeroed, BytesFor() bytes). Others: attach to the
  // one member 0 laid out, checking that it is one, has `members` members and a layout that fits
  // the segment within the limits above (kProtocol naming the segment if not). The header's
  // numbers are read once: what is checked is what is used.
  // `ranks` are the members' global ranks (error messages); `me` this process's member index.
  // Both register this process (pid, pid namespace) in its member line.
  static NodeArena Create(Segment segment, int me, const std::vector<int>& ranks,
                          size_t slot_bytes);
  static NodeArena Attach(Segment segment, int me, const std::vector<int>& ranks);
  // What Attach reads of a segment's first `size` bytes at `data`: the slot size, once the header
  // proves to be an arena of `members` members whose layout fits; kProtocol naming `name` if not.
  // (A seam for tests/fuzz/fuzz_arena_header.cc: any bytes, no crash.)
  static size_t CheckHeader(const void* data, size_t size, int members, const std::string& name);

  NodeArena(NodeArena&& other) noexcept;
  NodeArena& operator=(NodeArena&&) = delete;
  NodeArena(const NodeArena&) = delete;
  ~NodeArena();  // closes the pidfds; unmaps with the segment

  // Once every member has registered (the set-up's handshake says so): opens a pidfd for each
  // other member in this pid namespace. Members elsewhere (a container sharing /dev/shm) are
  // watched by the timeout only, as are all of them on kernels without pidfd_open.
  void WatchMembers();

  // Single-copy reads (comm/transport/cross_memory.h). ProbeSingleCopy, once every member has
  // registered: "" when this member can read every other member's memory directly (it reads the
  // arena's magic where each member mapped the segment), else why not (a member in another pid
  // namespace, or the kernel's refusal: EPERM under Yama's ptrace_scope >= 1). The node's members
  // agree on one answer (node_arena_setup.cc) and EnableSingleCopy sets it; single_copy() is
  // false until then.
  std::string ProbeSingleCopy() const;
  void EnableSingleCopy(bool on) { single_copy_ = on; }
  bool single_copy() const { return single_copy_; }
  // Copies `bytes` at address `remote` of member `member`'s process into `local`. Throws what an
  // abort of the group says if there was one, kPeerLost if that process is gone, else kIo with
  // the errno — naming the member and the operation (`op` #`seq`).
  void ReadMember(int member, uintptr_t remote, void* local, size_t bytes, const char* op,
                  uint64_t seq) const;

  int members() const { return static_cast<int>(ranks_.size()); }
  int me() const { return me_; }
  const std::vector<int>& ranks() const { return ranks_; }
  size_t slot_bytes() const { return slot_bytes_; }
  Segment& segment() { return segment_; }
  // Member `member`'s slot of set 0 or 1.
  char* slot(int set, int member) const;

  // The next barrier step / slot set to use: every member uses them in the same order.
  uint64_t NextStep() { return ++step_; }
  int NextSet() { return static_cast<int>(++uses_ & 1); }

  // Barrier: this member reached `step`; wait until every member did (or threw, below). `op` and
  // `seq` name the operation in errors ("allreduce(hier) #12").
  void Arrive(uint64_t step);
  void WaitAll(uint64_t step, std::chrono::milliseconds timeout, const char* op, uint64_t seq);

  // From any thread of any member: every wait, present and future, of every member throws with
  // `reason` (the first abort's wins), `code` and `peer_rank` (the rank the aborting member's
  // error named, or -1) — unless it sees a member dead, which it names instead.
  void Abort(const std::string& reason, ErrorCode code = ErrorCode::kAborted, int peer_rank = -1);
  bool aborted() const;

  void set_spin(std::chrono::microseconds spin) { spin_ = spin; }
  // Bumped (relaxed) at every completed barrier wait: what a waiting Work watches
  // (comm/operation_watch.h). Must outlive the arena's use; null = not counted.
  void set_progress(std::atomic<uint64_t>* progress) { progress_ = progress; }

 private:
  struct Header;
  struct Member;
  NodeArena(Segment segment, int me, std::vector<int> ranks, size_t slot_bytes);
  Header* header() const;
  Member& member(int i) const;
  void Register();
  // The first member not yet at `step`, or -1.
  int Behind(uint64_t step) const;
  // Throws kPeerLost if a watched member still behind `step` has exited.
  void CheckAlive(uint64_t step, const char* op, uint64_t seq) const;
  [[noreturn]] void ThrowAborted(uint64_t step, const char* op, uint64_t seq) const;
  [[noreturn]] void ThrowTimeout(uint64_t step, std::chrono::milliseconds timeout, const char* op,
                                 uint64_t seq) const;
  std::string Describe(int member) const;  // "rank 2 (pid 1234, this node)"

  Segment segment_;
  int me_ = 0;
  std::vector<int> ranks_;
  size_t slot_bytes_ = 0;
  std::vector<int> pidfds_;  // per member; -1 = not watched
  uint64_t step_ = 0;
  uint64_t uses_ = 0;
  std::chrono::microseconds spin_{500};
  std::atomic<uint64_t>* progress_ = nullptr;
  bool single_copy_ = false;
};

}  // namespace cdt::shm
