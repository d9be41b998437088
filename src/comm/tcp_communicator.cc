// TcpCommunicator: cdt::Communicator over a TcpMesh, one background thread executing queued
// operations in submission order (small ones with nothing ahead run on the caller's thread) (see
// include/cdt/communicator.h for the contract).
#include "cdt/tcp_communicator.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "cdt/error.h"
#include "comm/allreduce_autotuner.h"
#include "comm/collective_fingerprint.h"
#include "comm/collectives/algorithms.h"
#include "comm/node_arena_setup.h"
#include "comm/operation_watch.h"
#include "comm/reduce.h"
#include "comm/transport/tcp_mesh.h"
#include "comm/work_impl.h"
#include "common/thread_name.h"

namespace cdt {

namespace {

constexpr auto kWaitMargin = std::chrono::seconds(5);

const char* AllreduceLabel(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::kRing:
      return "allreduce(ring)";
    case AllreduceAlgorithm::kRecursiveDoubling:
      return "allreduce(rd)";
    case AllreduceAlgorithm::kHalvingDoubling:
      return "allreduce(rhd)";
    case AllreduceAlgorithm::kTree:
      return "allreduce(tree)";
    case AllreduceAlgorithm::kHierarchical:
      return "allreduce(hier)";
    case AllreduceAlgorithm::kAuto:
      return "allreduce(auto)";
  }
  return "allreduce";
}

class TcpCommunicator : public Communicator {
 public:
  TcpCommunicator(std::shared_ptr<OperationWatch> watch, std::unique_ptr<TcpMesh> mesh,
                  NodeArenaSetUp shm, const CommunicatorOptions& o)
      : options_(o),
        watch_(std::move(watch)),
        mesh_(std::move(mesh)),
        arena_(std::move(shm.arena)),
        hier_chunk_bytes_(shm.hier_chunk_bytes),
        shared_memory_(shm.every_node_shares_memory) {
    selector_ = options_.selector ? options_.selector : MakeFixedThresholdSelector();
    // Node layout: nodes numbered by the first rank seen on them.
    std::map<std::string, int> ids;
    layout_.node_of_rank.resize(static_cast<size_t>(o.size));
    std::map<int, int> per_node;
    for (int r = 0; r < o.size; ++r) {
      auto [it, added] =
          ids.emplace(mesh_->host_ids()[static_cast<size_t>(r)], static_cast<int>(ids.size()));
      layout_.node_of_rank[static_cast<size_t>(r)] = it->second;
      ++per_node[it->second];
    }
    layout_.num_nodes = static_cast<int>(ids.size());
    for (auto& [node, n] : per_node) max_ranks_per_node_ = std::max(max_ranks_per_node_, n);
    if (arena_) arena_->set_progress(watch_->counter());
    // A Work whose wait saw nothing move on this communicator for its timeout aborts it.
    watch_->Attach([this](const std::string& reason) { AbortWith(reason); });
    thread_ = std::thread([this] { Loop(); });
  }

  ~TcpCommunicator() override {
    watch_->Detach();  // Works outliving us never call in
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  uint64_t generation() const override { return options_.generation; }
  const NodeLayout& layout() const override { return layout_; }
  bool shares_memory() const override { return shared_memory_; }
  std::string backend_name() const override { return "tcp"; }

  CommStats stats() const override {
    CommStats s;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      for (size_t a = 0; a < allreduce_stats_.size(); ++a)
        if (allreduce_stats_[a].ops > 0) s.allreduce.push_back(allreduce_stats_[a]);
    }
    s.sent_bytes.resize(static_cast<size_t>(size()));
    s.received_bytes.resize(static_cast<size_t>(size()));
    for (int p = 0; p < size(); ++p) {
      s.sent_bytes[static_cast<size_t>(p)] = mesh_->bytes_sent_to(p);
      s.received_bytes[static_cast<size_t>(p)] = mesh_->bytes_received_from(p);
    }
    return s;
  }

  std::shared_ptr<Work> Allreduce(void* data, size_t count, DataType dtype, ReduceOp op,
                                  AllreduceOptions opt) override {
    // kAuto is resolved when the operation runs, not when it is queued: the autotuner's decision
    // may land between the two.
    CheckReduceOp(op, dtype, "allreduce");
    const AllreduceAlgorithm requested =
        opt.algorithm != AllreduceAlgorithm::kAuto ? opt.algorithm : options_.default_algorithm;
    const size_t elem = ElementSize(dtype);
    Fingerprint fp{0,
                   count,
                   -1,
                   static_cast<uint8_t>(OpKind::kAllreduce),
                   static_cast<uint8_t>(dtype),
                   static_cast<uint8_t>(op)};
    // The selector in force when the call is queued decides it, on every rank alike. (Not a
    // structured binding: the lambda below captures both, which clang accepts only from 16 on.)
    const auto current = CurrentSelector();
    const std::shared_ptr<AllreduceSelector> selector = current.first;
    const uint64_t epoch = current.second;
    return Submit(AllreduceLabel(requested), fp, count * elem, [=, this](CollectiveContext& ctx) {
      Group world = Group::World(rank(), size());
      ReduceBuffer buf{data, count, dtype, op};
      AllreduceAutotuner::Step step{requested, false, epoch, -1};
      if (requested == AllreduceAlgorithm::kAuto) {
        const AllreduceShape shape = Shape(count, dtype);
        if (auto ruled = RuledAlgorithm(shape))
          step.algorithm = *ruled;
        else if (size() == 1)
          step.algorithm = selector->Select(shape);  // nothing to tune: no peer, no traffic
        else
          step = tuner_.Begin(epoch, shape.bytes, dtype, selector->Select(shape),
                              selector->RunnerUp(shape));
      }
      const auto start = std::chrono::steady_clock::now();
      RunAllreduce(ctx, world, buf, step.algorithm);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      CountAllreduce(step.algorithm, count * elem, seconds);
      if (auto medians = tuner_.End(step, seconds)) {
        // Every rank reaches this point at the same call: agree on the slowest rank's times.
        ReduceBuffer agree{medians->data(), 2, DataType::kFloat64, ReduceOp::kMax};
        AllreduceRecursiveDoubling(ctx, world, agree);
        std::string report = tuner_.Decide(step, *medians);
        if (rank() == 0)
          options_.log.Info("cann-dist-train: {}{}", options_.urgent ? "priority channel: " : "",
                            report);
      }
      if (op == ReduceOp::kAvg) FinishAverage(data, count, dtype, size());
    });
  }

  std::shared_ptr<Work> Broadcast(void* data, size_t count, DataType dtype, int root) override {
    CheckRank(root, "broadcast root");
    Fingerprint fp{
        0, count, root, static_cast<uint8_t>(OpKind::kBroadcast), static_cast<uint8_t>(dtype), 0};
    const size_t bytes = count * ElementSize(dtype);
    return Submit("broadcast", fp, bytes, [=, this](CollectiveContext& ctx) {
      cdt::Broadcast(ctx, Group::World(rank(), size()), data, bytes, root);
    });
  }

  std::shared_ptr<Work> Allgatherv(const void* input, void* output,
                                   const std::vector<size_t>& counts, DataType dtype) override {
    const std::vector<size_t> offsets = BlockOffsets(counts, "allgatherv");
    Fingerprint fp{0,
                   offsets.back(),
                   -1,
                   static_cast<uint8_t>(OpKind::kAllgather),
                   static_cast<uint8_t>(dtype),
                   0};
    const size_t elem = ElementSize(dtype);
    return Submit("allgather", fp, offsets.back() * elem, [=, this](CollectiveContext& ctx) {
      const size_t me = static_cast<size_t>(rank());
      if (counts[me] > 0)  // empty vectors may hand us null pointers
        std::memmove(static_cast<char*>(output) + offsets[me] * elem, input, counts[me] * elem);
      const Group world = Group::World(rank(), size());
      if (ArenaSpansGroup(ctx, world))
        AllgathervShm(ctx, world, output, elem, offsets);
      else
        RingAllgatherPhase(ctx, world, output, elem, offsets);
    });
  }

  std::shared_ptr<Work> ReduceScatter(const void* input, void* output,
                                      const std::vector<size_t>& counts, DataType dtype,
                                      ReduceOp op) override {
    CheckReduceOp(op, dtype, "reduce_scatter");
    const std::vector<size_t> offsets = BlockOffsets(counts, "reduce_scatter");
    Fingerprint fp{0,
                   offsets.back(),
                   -1,
                   static_cast<uint8_t>(OpKind::kReduceScatter),
                   static_cast<uint8_t>(dtype),
                   static_cast<uint8_t>(op)};
    const size_t elem = ElementSize(dtype);
    return Submit("reduce_scatter", fp, offsets.back() * elem, [=, this](CollectiveContext& ctx) {
      const size_t me = static_cast<size_t>(rank());
      const Group world = Group::World(rank(), size());
      if (ArenaSpansGroup(ctx, world)) {
        ReduceScatterShm(ctx, world, input, output, offsets, dtype, op);
        if (op == ReduceOp::kAvg) FinishAverage(output, counts[me], dtype, size());
        return;
      }
      // The ring works in place; stage the (const) input in memory of our own.
      void* staged = staging_.Get(offsets.back() * elem);
      if (offsets.back() > 0) std::memcpy(staged, input, offsets.back() * elem);
      ReduceBuffer buf{staged, offsets.back(), dtype, op};
      RingReduceScatterPhase(ctx, world, buf, offsets);
      if (counts[me] > 0) std::memcpy(output, buf.at(offsets[me]), counts[me] * elem);
      if (op == ReduceOp::kAvg) FinishAverage(output, counts[me], dtype, size());
    });
  }

  std::shared_ptr<Work> Reduce(void* data, size_t count, DataType dtype, ReduceOp op,
                               int root) override {
    CheckRank(root, "reduce root");
    CheckReduceOp(op, dtype, "reduce");
    Fingerprint fp{0,
                   count,
                   root,
                   static_cast<uint8_t>(OpKind::kReduce),
                   static_cast<uint8_t>(dtype),
                   static_cast<uint8_t>(op)};
    const size_t bytes = count * ElementSize(dtype);
    return Submit("reduce", fp, bytes, [=, this](CollectiveContext& ctx) {
      // Off the root the reduction runs in a copy: the caller's buffer is left as it was.
      void* work = data;
      if (rank() != root && bytes > 0) {
        work = staging_.Get(bytes);
        std::memcpy(work, data, bytes);
      }
      cdt::Reduce(ctx, Group::World(rank(), size()), ReduceBuffer{work, count, dtype, op}, root);
      if (rank() == root && op == ReduceOp::kAvg) FinishAverage(data, count, dtype, size());
    });
  }

  std::shared_ptr<Work> Gatherv(const void* input, void* output, const std::vector<size_t>& counts,
                                DataType dtype, int root) override {
    CheckRank(root, "gather root");
    const std::vector<size_t> offsets = BlockOffsets(counts, "gatherv");
    Fingerprint fp{
        0, offsets.back(), root, static_cast<uint8_t>(OpKind::kGather), static_cast<uint8_t>(dtype),
        0};
    const size_t elem = ElementSize(dtype);
    return Submit("gather", fp, offsets.back() * elem, [=, this](CollectiveContext& ctx) {
      cdt::Gatherv(ctx, Group::World(rank(), size()), input, output, elem, offsets, root);
    });
  }

  std::shared_ptr<Work> Scatterv(const void* input, void* output, const std::vector<size_t>& counts,
                                 DataType dtype, int root) override {
    CheckRank(root, "scatter root");
    const std::vector<size_t> offsets = BlockOffsets(counts, "scatterv");
    Fingerprint fp{0,
                   offsets.back(),
                   root,
                   static_cast<uint8_t>(OpKind::kScatter),
                   static_cast<uint8_t>(dtype),
                   0};
    const size_t elem = ElementSize(dtype);
    return Submit("scatter", fp, offsets.back() * elem, [=, this](CollectiveContext& ctx) {
      cdt::Scatterv(ctx, Group::World(rank(), size()), input, output, elem, offsets, root);
    });
  }

  std::shared_ptr<Work> Alltoallv(const void* input, const std::vector<size_t>& send_counts,
                                  void* output, const std::vector<size_t>& recv_counts,
                                  DataType dtype) override {
    const std::vector<size_t> send = BlockOffsets(send_counts, "alltoallv send_counts");
    const std::vector<size_t> recv = BlockOffsets(recv_counts, "alltoallv recv_counts");
    const size_t me = static_cast<size_t>(rank());
    if (send_counts[me] != recv_counts[me])
      throw Error(ErrorCode::kInvalidArgument,
                  "alltoallv on rank " + std::to_string(rank()) + ": it sends itself " +
                      std::to_string(send_counts[me]) + " element(s) but expects " +
                      std::to_string(recv_counts[me]) + " from itself");
    Fingerprint fp{0, 0, -1, static_cast<uint8_t>(OpKind::kAlltoall), static_cast<uint8_t>(dtype),
                   0};
    const size_t elem = ElementSize(dtype);
    // The size picks the channel, and each rank's counts are its own: every rank takes the bulk
    // channel alike (one that took the other would wait on a socket its peer never writes).
    // The size of this rank's input decides whether it runs on the caller's thread (a local
    // choice; with uneven splits the outputs differ, the inputs of an all_to_all_single rarely).
    const size_t moved = send.back() * elem;
    return Submit("alltoall", fp, std::max<size_t>(options_.bulk_min_bytes, 1), moved,
                  [=, this](CollectiveContext& ctx) {
                    const Group world = Group::World(rank(), size());
                    if (ArenaSpansGroup(ctx, world) &&
                        AlltoallvShmRegionBytes(ctx.arena->slot_bytes(), world.size()) > 0)
                      AlltoallvShm(ctx, world, input, send, output, recv, elem);
                    else
                      cdt::Alltoallv(ctx, world, input, send, output, recv, elem);
                  });
  }

  std::shared_ptr<Work> Barrier() override {
    Fingerprint fp{0, 0, -1, static_cast<uint8_t>(OpKind::kBarrier), 0, 0};
    return Submit("barrier", fp, 0, [this](CollectiveContext& ctx) {
      const Group world = Group::World(rank(), size());
      // Every rank on this node: the arena's barrier (a 4-rank barrier 51 -> 5 us; over TCP the
      // dissemination barrier's three rounds of one-byte messages).
      if (ArenaSpansGroup(ctx, world))
        ArenaBarrier(ctx, *ctx.arena);
      else
        cdt::Barrier(ctx, world);
    });
  }

  std::shared_ptr<Work> Send(const void* data, size_t bytes, int dst) override {
    CheckPeer(dst, "send destination");
    Fingerprint fp{0, bytes, dst, static_cast<uint8_t>(OpKind::kSend), 0, 0};
    return Submit("send", fp, bytes, [=](CollectiveContext& ctx) {
      Transfer t = Transfer::Send(dst, data, bytes);
      ctx.mesh.Exchange(&t, 1, ctx.label);
    });
  }

  std::shared_ptr<Work> Recv(void* data, size_t bytes, int src) override {
    CheckPeer(src, "recv source");
    Fingerprint fp{0, bytes, src, static_cast<uint8_t>(OpKind::kRecv), 0, 0};
    return Submit("recv", fp, bytes, [=](CollectiveContext& ctx) {
      Transfer t = Transfer::Recv(src, data, bytes);
      ctx.mesh.Exchange(&t, 1, ctx.label);
    });
  }

  AllreduceAlgorithm ResolveAllreduce(size_t count, DataType dtype) const override {
    if (options_.default_algorithm != AllreduceAlgorithm::kAuto) return options_.default_algorithm;
    const AllreduceShape shape = Shape(count, dtype);
    if (auto ruled = RuledAlgorithm(shape)) return *ruled;
    auto [selector, epoch] = CurrentSelector();
    if (auto decided = tuner_.Decided(epoch, shape.bytes, dtype)) return *decided;
    return selector->Select(shape);
  }

  void SetAllreduceSelector(std::shared_ptr<AllreduceSelector> selector) override {
    std::lock_guard<std::mutex> lock(selector_mu_);
    selector_ = selector ? std::move(selector) : MakeFixedThresholdSelector();
    ++selector_epoch_;
  }

  std::pair<std::shared_ptr<AllreduceSelector>, uint64_t> CurrentSelector() const {
    std::lock_guard<std::mutex> lock(selector_mu_);
    return {selector_, selector_epoch_};
  }

  AllreduceShape Shape(size_t count, DataType dtype) const {
    return {count * ElementSize(dtype), dtype,         size(), layout_.num_nodes,
            max_ranks_per_node_,        shared_memory_};
  }

  std::optional<AllreduceAlgorithm> RuledAlgorithm(const AllreduceShape& shape) const {
    if (!options_.rules) return std::nullopt;
    return options_.rules->Match(shape.bytes, shape.num_nodes, shape.world_size);
  }

  void RunAllreduce(CollectiveContext& ctx, const Group& world, const ReduceBuffer& buf,
                    AllreduceAlgorithm algo) {
    switch (algo) {
      case AllreduceAlgorithm::kRing:
        AllreduceRing(ctx, world, buf);
        break;
      case AllreduceAlgorithm::kRecursiveDoubling:
        AllreduceRecursiveDoubling(ctx, world, buf);
        break;
      case AllreduceAlgorithm::kHalvingDoubling:
        AllreduceHalvingDoubling(ctx, world, buf);
        break;
      case AllreduceAlgorithm::kTree:
        AllreduceTree(ctx, world, buf);
        break;
      case AllreduceAlgorithm::kHierarchical:
        AllreduceHierarchical(ctx, world, buf, layout_.node_of_rank);
        break;
      case AllreduceAlgorithm::kAuto:
        break;  // selectors never return it
    }
  }

  void Abort() override {
    AbortWith("rank " + std::to_string(rank()) + ": communicator (generation " +
              std::to_string(generation()) + ") was aborted");
  }

 private:
  // Abort() with the reason the queued operations report (the first reason wins).
  void AbortWith(const std::string& why) {
    std::deque<Op> dropped;
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.empty()) broken_ = why;
      reason = broken_;
      dropped.swap(queue_);
      queued_.store(0);
    }
    mesh_->Wake();
    mesh_->ShutdownAll();
    if (arena_) arena_->Abort(reason);
    for (Op& op : dropped) op.work->Finish(AbortedError(op));
    cv_.notify_all();
  }

  void CountAllreduce(AllreduceAlgorithm algorithm, size_t bytes, double seconds) {
    const auto a = static_cast<size_t>(algorithm);
    if (a >= allreduce_stats_.size()) return;
    std::lock_guard<std::mutex> lock(stats_mu_);
    CommStats::Algorithm& s = allreduce_stats_[a];
    if (s.name.empty()) s.name = AllreduceAlgorithmName(algorithm);
    ++s.ops;
    s.bytes += bytes;
    s.seconds += seconds;
  }

  struct Op {
    const char* name;
    uint64_t seq;
    Fingerprint fp;
    size_t bytes;  // payload size, picks the channel: the same on every rank
    std::function<void(CollectiveContext&)> run;
    std::shared_ptr<WorkImpl> work;
  };

  // Where each rank's block starts in the whole, and where the whole ends: counts' prefix sums,
  // once counts has one entry per rank.
  std::vector<size_t> BlockOffsets(const std::vector<size_t>& counts, const char* op) const {
    if (counts.size() != static_cast<size_t>(size()))
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(op) + ": counts has " + std::to_string(counts.size()) +
                      " entries, the world has " + std::to_string(size()) + " ranks");
    std::vector<size_t> offsets(counts.size() + 1, 0);
    std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
    return offsets;
  }

  void CheckRank(int r, const char* what) const {
    if (r < 0 || r >= size())
      throw Error(ErrorCode::kInvalidArgument, std::string(what) + " " + std::to_string(r) +
                                                   " is outside 0.." + std::to_string(size() - 1));
  }
  void CheckPeer(int r, const char* what) const {
    CheckRank(r, what);
    if (r == rank())
      throw Error(ErrorCode::kInvalidArgument, std::string(what) + " is this rank itself");
  }

  std::exception_ptr AbortedError(const Op& op) const {
    return std::make_exception_ptr(Error(ErrorCode::kAborted,
                                         std::string(op.name) + " #" + std::to_string(op.seq) +
                                             " on rank " + std::to_string(rank()) +
                                             " not run: " + broken_,
                                         {rank(), -1, "", op.name, op.seq}));
  }

  std::shared_ptr<Work> Submit(const char* name, Fingerprint fp, size_t bytes,
                               std::function<void(CollectiveContext&)> run) {
    return Submit(name, fp, bytes, bytes, std::move(run));
  }

  // `bytes` picks the channel (the same on every rank); `local_bytes`, what this rank moves,
  // whether it runs on the caller's thread (each rank may choose differently: the order is the
  // same).
  std::shared_ptr<Work> Submit(const char* name, Fingerprint fp, size_t bytes, size_t local_bytes,
                               std::function<void(CollectiveContext&)> run) {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t seq = ++next_seq_;
    fp.seq = seq;
    auto work = std::make_shared<WorkImpl>(
        std::string(name) + " #" + std::to_string(seq) + " on rank " + std::to_string(rank()),
        options_.timeout + kWaitMargin, options_.idle_spin, watch_);
    Op op{name, seq, fp, bytes, std::move(run), work};
    if (!broken_.empty()) {
      work->Finish(AbortedError(op));
      return work;
    }
    // Small and nothing ahead of it: run it here (CommunicatorOptions::inline_max_bytes). Never a
    // send or receive: a receive run here would keep this thread from posting the send its peer
    // waits for (the isend/irecv ring).
    if (local_bytes <= options_.inline_max_bytes && !IsPointToPoint(op.fp) && queue_.empty() &&
        !running_) {
      running_ = true;
      lock.unlock();
      CollectiveContext ctx = Context();
      Execute(op, ctx);
      lock.lock();
      running_ = false;
      // Wake the background thread only when it has something to do: waking it for nothing cost
      // each rank 20% of a core at 50,000 small collectives a second.
      if (!queue_.empty() || stopping_) cv_.notify_all();
      return work;
    }
    queue_.push_back(std::move(op));
    queued_.fetch_add(1);
    cv_.notify_all();
    return work;
  }

  static bool IsPointToPoint(const Fingerprint& fp) {
    return fp.op == static_cast<uint8_t>(OpKind::kSend) ||
           fp.op == static_cast<uint8_t>(OpKind::kRecv);
  }

  CollectiveContext Context() {
    return CollectiveContext{*mesh_,       scratch_,         {}, options_.segment_bytes,
                             arena_.get(), hier_chunk_bytes_};
  }

  void Loop() {
    NameThisThread(options_.urgent ? "cdt-comm-pri" : "cdt-comm");
    CollectiveContext ctx = Context();
    for (;;) {
      Op op;
      {
        // Look for the next operation a little before sleeping (CommunicatorOptions::idle_spin).
        const auto until = std::chrono::steady_clock::now() + options_.idle_spin;
        while (queued_.load(std::memory_order_acquire) == 0 &&
               std::chrono::steady_clock::now() < until)
          sched_yield();
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !running_ && (stopping_ || !queue_.empty()); });
        if (queue_.empty()) return;  // stopping and drained
        op = std::move(queue_.front());
        queue_.pop_front();
        queued_.fetch_sub(1);
        if (!broken_.empty()) {
          op.work->Finish(AbortedError(op));
          continue;
        }
        running_ = true;
      }
      Execute(op, ctx);
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
  }

  // Runs one operation on this thread (the background thread's, or the caller's for an inline
  // one: running_ makes them take turns) and finishes its Work.
  void Execute(Op& op, CollectiveContext& ctx) {
    ctx.label = OpLabel{op.name, op.seq};
    try {
      mesh_->UseChannel(TcpMesh::kLatencyChannel);
      if (options_.check_fingerprints && !IsPointToPoint(op.fp))
        CheckFingerprints(*mesh_, op.fp, ctx.label);
      // Every rank derives the same channel from the same size (p2p: both ends pass the size).
      mesh_->UseChannel(op.bytes >= options_.bulk_min_bytes ? TcpMesh::kBulkChannel
                                                            : TcpMesh::kLatencyChannel);
      op.work->MarkStarted();
      watch_->Tick();
      op.run(ctx);
      watch_->Tick();
      op.work->Finish(nullptr);
    } catch (const Error& e) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (broken_.empty()) broken_ = std::string("earlier failure: ") + e.what();
      }
      // Close every connection (and wake this node's ranks waiting in shared memory) so peers
      // blocked on us fail now rather than at their timeout.
      mesh_->ShutdownAll();
      if (arena_) arena_->Abort(e.what(), e.code(), e.context().peer_rank);
      op.work->Finish(std::current_exception());
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (broken_.empty()) broken_ = "earlier failure: unexpected exception";
      }
      mesh_->ShutdownAll();
      if (arena_) arena_->Abort("unexpected exception");
      op.work->Finish(std::current_exception());
    }
  }

  // Constant after construction.
  CommunicatorOptions options_;
  // Progress and abort as waiting Works see them; outlives the mesh and arena that tick it.
  std::shared_ptr<OperationWatch> watch_;
  mutable std::mutex selector_mu_;
  std::shared_ptr<AllreduceSelector> selector_;  // guarded by selector_mu_
  uint64_t selector_epoch_ = 0;                  // guarded by selector_mu_
  AllreduceAutotuner tuner_{options_.autotune_trials, options_.autotune_min_bytes};
  std::unique_ptr<TcpMesh> mesh_;
  std::unique_ptr<shm::NodeArena> arena_;  // null: no same-node peers, or shared memory off
  size_t hier_chunk_bytes_;
  bool shared_memory_;
  NodeLayout layout_;
  int max_ranks_per_node_ = 1;

  // stats(): per AllreduceAlgorithm value (kAuto never runs: it is resolved first).
  mutable std::mutex stats_mu_;
  std::array<CommStats::Algorithm, 6> allreduce_stats_;  // guarded by stats_mu_

  // Used only by whoever runs an operation (running_).
  Workspace scratch_;
  Workspace staging_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;        // guarded by mu_
  std::atomic<int> queued_{0};  // queue_.size(), readable without the lock (the idle spin)
  uint64_t next_seq_ = 0;       // guarded by mu_
  std::string broken_;          // guarded by mu_; non-empty once broken
  bool stopping_ = false;       // guarded by mu_
  bool running_ = false;        // guarded by mu_; an operation runs (background or inline)
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Communicator> ConnectTcpCommunicator(Store& store, const CommunicatorOptions& o) {
  // Sizes that came from outside (CDT_SHM_SLOT_BYTES, CDT_SEGMENT_BYTES) are checked here, where
  // every caller passes: a wrapped size would lay out a segment too small for its slots.
  if (o.shm_slot_bytes > shm::NodeArena::kMaxSlotBytes)
    throw Error(ErrorCode::kInvalidArgument,
                "rank " + std::to_string(o.rank) + ": shared-memory slot of " +
                    std::to_string(o.shm_slot_bytes) + " bytes (CDT_SHM_SLOT_BYTES): at most " +
                    std::to_string(shm::NodeArena::kMaxSlotBytes));
  if (o.segment_bytes == 0 || o.segment_bytes > (size_t{1} << 30))
    throw Error(ErrorCode::kInvalidArgument,
                "rank " + std::to_string(o.rank) + ": segment of " +
                    std::to_string(o.segment_bytes) +
                    " bytes (CDT_SEGMENT_BYTES): must be 1 byte to 1 GiB");
  if (o.timeout.count() <= 0)
    throw Error(ErrorCode::kInvalidArgument,
                "rank " + std::to_string(o.rank) + ": the timeout must be positive");
  MeshOptions m;
  m.log = o.log;
  m.rank = o.rank;
  m.size = o.size;
  m.generation = o.generation;
  m.key_prefix = o.job_id + "/gen" + std::to_string(o.generation);
  m.secret = o.secret;
  m.allow_insecure = o.allow_insecure;
  m.encrypt = o.encrypt;
  m.bind_host = o.bind_host;
  m.advertise_host = o.advertise_host;
  m.host_id = o.host_id;
  m.timeout = o.timeout;
  m.local_latency_socket_buffer_bytes = o.local_latency_socket_buffer_bytes;
  m.local_bulk_socket_buffer_bytes = o.local_bulk_socket_buffer_bytes;
  m.remote_socket_buffer_bytes = o.remote_socket_buffer_bytes;
  m.spin = o.spin;
  m.remote_spin = o.remote_spin;
  m.remote_receive_batch_bytes = o.remote_receive_batch_bytes;
  m.traffic_gate = o.traffic_gate;
  m.urgent = o.urgent;
  m.yield_send_buffer_bytes = o.yield_send_buffer_bytes;
  m.yield_send_buffer_min_bytes = o.yield_send_buffer_min_bytes;
  auto watch = std::make_shared<OperationWatch>();
  m.progress = watch->counter();
  std::unique_ptr<TcpMesh> mesh = TcpMesh::Connect(store, m);
  NodeArenaOptions shm;
  shm.enabled = o.shared_memory;
  shm.slot_bytes = std::max<size_t>(o.shm_slot_bytes, 4096);
  shm.job_id = o.job_id;
  shm.generation = o.generation;
  shm.spin = o.spin;
  shm.single_copy = o.shm_single_copy;
  shm.log = o.log;
  NodeArenaSetUp arena = SetUpNodeArena(*mesh, shm);
  return std::make_unique<TcpCommunicator>(std::move(watch), std::move(mesh), std::move(arena), o);
}

}  // namespace cdt
