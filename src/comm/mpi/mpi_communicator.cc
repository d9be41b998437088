#include "comm/mpi/mpi_communicator.h"

#include <mpi.h>

#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "cdt/allreduce_selector.h"
#include "cdt/error.h"
#include "comm/reduce.h"
#include "comm/transport/tcp_mesh.h"  // LocalHostId
#include "comm/work_impl.h"
#include "common/half.h"

namespace cdt {

namespace {

// f16 / bf16 reductions (MPI has no such types): ReduceInto as a user-defined MPI_Op, one per
// (type, op) for sum, avg, max, min and product (the bitwise ops are refused on floats).
template <DataType kType, int kOp>
void Reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(inout, in, static_cast<size_t>(*len), kType, static_cast<ReduceOp>(kOp));
}

constexpr int kOps16 = 5;

template <DataType kType, int... kOp>
void CreateOps16(MPI_Op (&ops)[kOps16], std::integer_sequence<int, kOp...>) {
  (MPI_Op_create(&Reduce16<kType, kOp>, 1, &ops[kOp]), ...);
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      owns_init_ = true;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    CreateOps16<DataType::kFloat16>(ops16_[0], std::make_integer_sequence<int, kOps16>());
    CreateOps16<DataType::kBFloat16>(ops16_[1], std::make_integer_sequence<int, kOps16>());
    // Node layout from host ids.
    std::string id = LocalHostId();
    id.resize(256, '\0');
    std::vector<char> all(static_cast<size_t>(size_) * 256);
    MPI_Allgather(id.data(), 256, MPI_CHAR, all.data(), 256, MPI_CHAR, comm_);
    std::map<std::string, int> ids;
    for (int r = 0; r < size_; ++r) {
      auto [it, added] = ids.emplace(std::string(&all[static_cast<size_t>(r) * 256], 256),
                                     static_cast<int>(ids.size()));
      layout_.node_of_rank.push_back(it->second);
    }
    layout_.num_nodes = static_cast<int>(ids.size());
  }

  ~MpiCommunicator() override {
    for (auto& row : ops16_)
      for (auto& op : row) MPI_Op_free(&op);
    MPI_Comm_free(&comm_);
    if (owns_init_) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t generation() const override { return 0; }
  const NodeLayout& layout() const override { return layout_; }
  std::string backend_name() const override { return "mpi"; }

  std::shared_ptr<Work> Allreduce(void* data, size_t count, DataType dtype, ReduceOp op,
                                  AllreduceOptions) override {
    return Run("allreduce", [&] {
      if (count == 0) return MPI_SUCCESS;
      int rc = MPI_Allreduce(MPI_IN_PLACE, data, Count(count), Type(dtype), Op(dtype, op), comm_);
      if (rc == MPI_SUCCESS && op == ReduceOp::kAvg) FinishAverage(data, count, dtype, size_);
      return rc;
    });
  }
  std::shared_ptr<Work> Broadcast(void* data, size_t count, DataType dtype, int root) override {
    return Run("broadcast",
               [&] { return MPI_Bcast(data, Count(count), Type(dtype), root, comm_); });
  }
  std::shared_ptr<Work> Allgatherv(const void* input, void* output,
                                   const std::vector<size_t>& counts, DataType dtype) override {
    return Run("allgather", [&] {
      auto [c, d] = CountsAndDisplacements(counts);
      return MPI_Allgatherv(input, c[static_cast<size_t>(rank_)], Type(dtype), output, c.data(),
                            d.data(), Type(dtype), comm_);
    });
  }
  std::shared_ptr<Work> ReduceScatter(const void* input, void* output,
                                      const std::vector<size_t>& counts, DataType dtype,
                                      ReduceOp op) override {
    return Run("reduce_scatter", [&] {
      std::vector<int> c;
      for (size_t n : counts) c.push_back(Count(n));
      int rc = MPI_Reduce_scatter(input, output, c.data(), Type(dtype), Op(dtype, op), comm_);
      if (rc == MPI_SUCCESS && op == ReduceOp::kAvg)
        FinishAverage(output, counts[static_cast<size_t>(rank_)], dtype, size_);
      return rc;
    });
  }
  std::shared_ptr<Work> Reduce(void* data, size_t count, DataType dtype, ReduceOp op,
                               int root) override {
    return Run("reduce", [&] {
      if (count == 0) return MPI_SUCCESS;
      const bool at_root = rank_ == root;
      int rc = MPI_Reduce(at_root ? MPI_IN_PLACE : data, at_root ? data : nullptr, Count(count),
                          Type(dtype), Op(dtype, op), root, comm_);
      if (rc == MPI_SUCCESS && at_root && op == ReduceOp::kAvg)
        FinishAverage(data, count, dtype, size_);
      return rc;
    });
  }
  std::shared_ptr<Work> Gatherv(const void* input, void* output, const std::vector<size_t>& counts,
                                DataType dtype, int root) override {
    return Run("gather", [&] {
      auto [c, d] = CountsAndDisplacements(counts);
      return MPI_Gatherv(input, c[static_cast<size_t>(rank_)], Type(dtype), output, c.data(),
                         d.data(), Type(dtype), root, comm_);
    });
  }
  std::shared_ptr<Work> Scatterv(const void* input, void* output, const std::vector<size_t>& counts,
                                 DataType dtype, int root) override {
    return Run("scatter", [&] {
      auto [c, d] = CountsAndDisplacements(counts);
      return MPI_Scatterv(input, c.data(), d.data(), Type(dtype), output,
                          c[static_cast<size_t>(rank_)], Type(dtype), root, comm_);
    });
  }
  std::shared_ptr<Work> Alltoallv(const void* input, const std::vector<size_t>& send_counts,
                                  void* output, const std::vector<size_t>& recv_counts,
                                  DataType dtype) override {
    return Run("alltoall", [&] {
      auto [sc, sd] = CountsAndDisplacements(send_counts);
      auto [rc, rd] = CountsAndDisplacements(recv_counts);
      return MPI_Alltoallv(input, sc.data(), sd.data(), Type(dtype), output, rc.data(), rd.data(),
                           Type(dtype), comm_);
    });
  }
  std::shared_ptr<Work> Barrier() override {
    return Run("barrier", [&] { return MPI_Barrier(comm_); });
  }
  std::shared_ptr<Work> Send(const void* data, size_t bytes, int dst) override {
    return Run("send", [&] { return MPI_Send(data, Count(bytes), MPI_BYTE, dst, 0, comm_); });
  }
  std::shared_ptr<Work> Recv(void* data, size_t bytes, int src) override {
    return Run("recv", [&] {
      return MPI_Recv(data, Count(bytes), MPI_BYTE, src, 0, comm_, MPI_STATUS_IGNORE);
    });
  }
  void SetAllreduceSelector(std::shared_ptr<AllreduceSelector> selector) override {
    selector_ = std::move(selector);  // kept for symmetry; MPI chooses its own algorithm
  }
  AllreduceAlgorithm ResolveAllreduce(size_t, DataType) const override {
    return AllreduceAlgorithm::kAuto;  // MPI's own choice, not visible to us
  }
  void Abort() override { MPI_Abort(comm_, 1); }

 private:
  // MPI's int counts and displacements for per-rank element counts.
  std::pair<std::vector<int>, std::vector<int>> CountsAndDisplacements(
      const std::vector<size_t>& counts) const {
    std::vector<int> c, d;
    size_t off = 0;
    for (size_t n : counts) {
      c.push_back(Count(n));
      d.push_back(Count(off));
      off += n;
    }
    return {c, d};
  }
  int Count(size_t n) const {
    if (n > static_cast<size_t>(INT32_MAX))
      throw Error(ErrorCode::kInvalidArgument,
                  "MPI backend: counts above 2^31-1 elements are not "
                  "supported by MPI-3 int counts; split the buffer");
    return static_cast<int>(n);
  }
  static MPI_Datatype Type(DataType t) {
    switch (t) {
      case DataType::kFloat32:
        return MPI_FLOAT;
      case DataType::kFloat64:
        return MPI_DOUBLE;
      case DataType::kInt32:
        return MPI_INT32_T;
      case DataType::kInt64:
        return MPI_INT64_T;
      case DataType::kInt8:
        return MPI_INT8_T;
      case DataType::kUInt8:
        return MPI_UINT8_T;
      case DataType::kInt16:
        return MPI_INT16_T;
      case DataType::kBool:
        return MPI_C_BOOL;
      case DataType::kFloat16:
      case DataType::kBFloat16:
        return MPI_UINT16_T;
    }
    return MPI_BYTE;
  }
  MPI_Op Op(DataType t, ReduceOp op) const {
    CheckReduceOp(op, t, "mpi");
    if (t == DataType::kFloat16 || t == DataType::kBFloat16)
      return ops16_[t == DataType::kFloat16 ? 0 : 1][static_cast<int>(op)];
    if (t == DataType::kBool) {
      if (op == ReduceOp::kBxor) return MPI_LXOR;
      return (op == ReduceOp::kProduct || op == ReduceOp::kMin || op == ReduceOp::kBand) ? MPI_LAND
                                                                                         : MPI_LOR;
    }
    switch (op) {
      case ReduceOp::kMax:
        return MPI_MAX;
      case ReduceOp::kMin:
        return MPI_MIN;
      case ReduceOp::kProduct:
        return MPI_PROD;
      case ReduceOp::kBand:
        return MPI_BAND;
      case ReduceOp::kBor:
        return MPI_BOR;
      case ReduceOp::kBxor:
        return MPI_BXOR;
      default:
        return MPI_SUM;  // kSum, kAvg (divided after)
    }
  }
  template <typename F>
  std::shared_ptr<Work> Run(const char* name, F&& f) {
    uint64_t seq = ++seq_;
    auto work = std::make_shared<WorkImpl>(std::string(name) + " #" + std::to_string(seq),
                                           std::chrono::hours(1));
    work->MarkStarted();
    int rc = f();
    if (rc != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(rc, msg, &len);
      work->Finish(std::make_exception_ptr(
          Error(ErrorCode::kPeerLost,
                "rank " + std::to_string(rank_) + " (MPI) failed " + name + " #" +
                    std::to_string(seq) + ": " + std::string(msg, static_cast<size_t>(len)),
                {rank_, -1, "", name, seq})));
    } else {
      work->Finish(nullptr);
    }
    return work;
  }

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  bool owns_init_ = false;
  MPI_Op ops16_[2][kOps16];
  NodeLayout layout_;
  uint64_t seq_ = 0;
  std::shared_ptr<AllreduceSelector> selector_;
};

}  // namespace

std::unique_ptr<Communicator> CreateMpiCommunicator() {
  return std::make_unique<MpiCommunicator>();
}

}  // namespace cdt
