#include "python/c10d_communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "cdt/error.h"

namespace cdt::python {

namespace {

at::ScalarType ScalarTypeOf(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return at::kFloat;
    case DataType::kFloat64:
      return at::kDouble;
    case DataType::kFloat16:
      return at::kHalf;
    case DataType::kBFloat16:
      return at::kBFloat16;
    case DataType::kInt32:
      return at::kInt;
    case DataType::kInt64:
      return at::kLong;
    case DataType::kInt8:
      return at::kChar;
    case DataType::kUInt8:
      return at::kByte;
    case DataType::kBool:
      return at::kBool;
    case DataType::kInt16:
      return at::kShort;
  }
  return at::kFloat;
}

at::Tensor View(const void* data, size_t count, DataType dtype) {
  return at::from_blob(const_cast<void*>(data), {static_cast<int64_t>(count)},
                       at::TensorOptions().dtype(ScalarTypeOf(dtype)));
}

// A finished operation: the process group's work was waited for when it was submitted.
class DoneWork : public Work {
 public:
  void Wait(std::chrono::milliseconds) override {}
  void Wait() override {}
  bool Completed() const override { return true; }
};

std::shared_ptr<Work> Finish(const c10::intrusive_ptr<::c10d::Work>& w, const char* what) {
  try {
    w->wait();
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kPeerLost, std::string("torch.distributed ") + what + ": " + e.what());
  }
  return std::make_shared<DoneWork>();
}

::c10d::ReduceOp C10dOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return ::c10d::ReduceOp::SUM;  // AVG: divided after (Gloo has none)
    case ReduceOp::kMax:
      return ::c10d::ReduceOp::MAX;
    case ReduceOp::kMin:
      return ::c10d::ReduceOp::MIN;
    case ReduceOp::kProduct:
      return ::c10d::ReduceOp::PRODUCT;
    case ReduceOp::kBand:
      return ::c10d::ReduceOp::BAND;
    case ReduceOp::kBor:
      return ::c10d::ReduceOp::BOR;
    case ReduceOp::kBxor:
      return ::c10d::ReduceOp::BXOR;
  }
  return ::c10d::ReduceOp::SUM;
}

}  // namespace

C10dCommunicator::C10dCommunicator(c10::intrusive_ptr<::c10d::ProcessGroup> pg)
    : pg_(std::move(pg)) {
  layout_.node_of_rank.assign(static_cast<size_t>(pg_->getSize()), 0);
  layout_.num_nodes = 1;
}

std::shared_ptr<Work> C10dCommunicator::Allreduce(void* data, size_t count, DataType dtype,
                                                  ReduceOp op, AllreduceOptions) {
  CheckReduceOp(op, dtype, "allreduce");
  at::Tensor view = View(data, count, dtype);
  // bfloat16 is reduced in float32 and rounded back, as the engine does: Gloo has no bfloat16.
  std::vector<at::Tensor> t = {dtype == DataType::kBFloat16 ? view.to(at::kFloat) : view};
  ::c10d::AllreduceOptions o;
  o.reduceOp = C10dOp(op);
  auto done = Finish(pg_->allreduce(t, o), "allreduce");
  if (op == ReduceOp::kAvg) {
    if (at::isFloatingType(t[0].scalar_type()))
      t[0].div_(size());
    else
      t[0].div_(size(), "trunc");
  }
  if (!t[0].is_same(view)) view.copy_(t[0]);
  return done;
}

std::shared_ptr<Work> C10dCommunicator::Broadcast(void* data, size_t count, DataType dtype,
                                                  int root) {
  std::vector<at::Tensor> t = {View(data, count, dtype)};
  ::c10d::BroadcastOptions o;
  o.rootRank = root;
  return Finish(pg_->broadcast(t, o), "broadcast");
}

std::shared_ptr<Work> C10dCommunicator::Allgatherv(const void* input, void* output,
                                                   const std::vector<size_t>& counts,
                                                   DataType dtype) {
  const size_t most = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  const size_t elem = ElementSize(dtype);
  at::Tensor mine =
      at::zeros({static_cast<int64_t>(most)}, at::TensorOptions().dtype(ScalarTypeOf(dtype)));
  std::memcpy(mine.data_ptr(), input, counts[static_cast<size_t>(rank())] * elem);
  std::vector<at::Tensor> in = {mine};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size(); ++r) out[0].push_back(at::empty_like(mine));
  auto done = Finish(pg_->allgather(out, in), "allgather");
  char* dst = static_cast<char*>(output);
  for (int r = 0; r < size(); ++r) {
    const size_t bytes = counts[static_cast<size_t>(r)] * elem;
    std::memcpy(dst, out[0][static_cast<size_t>(r)].data_ptr(), bytes);
    dst += bytes;
  }
  return done;
}

std::shared_ptr<Work> C10dCommunicator::ReduceScatter(const void* input, void* output,
                                                      const std::vector<size_t>& counts,
                                                      DataType dtype, ReduceOp op) {
  size_t total = 0, offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) < rank()) offset += counts[r];
    total += counts[r];
  }
  at::Tensor all = View(input, total, dtype).clone();
  Allreduce(all.data_ptr(), total, dtype, op);
  const size_t elem = ElementSize(dtype);
  std::memcpy(output, static_cast<const char*>(all.data_ptr()) + offset * elem,
              counts[static_cast<size_t>(rank())] * elem);
  return std::make_shared<DoneWork>();
}

std::shared_ptr<Work> C10dCommunicator::Reduce(void* data, size_t count, DataType dtype,
                                               ReduceOp op, int root) {
  // torch.distributed's reduce may write into the other ranks' tensors: reduce a copy there.
  at::Tensor t = rank() == root ? View(data, count, dtype) : View(data, count, dtype).clone();
  std::vector<at::Tensor> ts = {t};
  ::c10d::ReduceOptions o;
  o.reduceOp = C10dOp(op);
  o.rootRank = root;
  auto done = Finish(pg_->reduce(ts, o), "reduce");
  if (op == ReduceOp::kAvg && rank() == root) {
    if (at::isFloatingType(t.scalar_type()))
      t.div_(size());
    else
      t.div_(size(), "trunc");
  }
  return done;
}

// Gather and scatter through torch.distributed's equal-size calls: every block padded to the
// largest.
std::shared_ptr<Work> C10dCommunicator::Gatherv(const void* input, void* output,
                                                const std::vector<size_t>& counts, DataType dtype,
                                                int root) {
  const size_t most = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  const size_t elem = ElementSize(dtype);
  const auto options = at::TensorOptions().dtype(ScalarTypeOf(dtype));
  at::Tensor mine = at::zeros({static_cast<int64_t>(most)}, options);
  std::memcpy(mine.data_ptr(), input, counts[static_cast<size_t>(rank())] * elem);
  std::vector<at::Tensor> in = {mine};
  std::vector<std::vector<at::Tensor>> out;
  if (rank() == root) {
    out.resize(1);
    for (int r = 0; r < size(); ++r) out[0].push_back(at::empty_like(mine));
  }
  ::c10d::GatherOptions o;
  o.rootRank = root;
  auto done = Finish(pg_->gather(out, in, o), "gather");
  if (rank() != root) return done;
  char* dst = static_cast<char*>(output);
  for (int r = 0; r < size(); ++r) {
    const size_t bytes = counts[static_cast<size_t>(r)] * elem;
    std::memcpy(dst, out[0][static_cast<size_t>(r)].data_ptr(), bytes);
    dst += bytes;
  }
  return done;
}

std::shared_ptr<Work> C10dCommunicator::Scatterv(const void* input, void* output,
                                                 const std::vector<size_t>& counts, DataType dtype,
                                                 int root) {
  const size_t most = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  const size_t elem = ElementSize(dtype);
  const auto options = at::TensorOptions().dtype(ScalarTypeOf(dtype));
  std::vector<at::Tensor> out = {at::zeros({static_cast<int64_t>(most)}, options)};
  std::vector<std::vector<at::Tensor>> in;
  if (rank() == root) {
    in.resize(1);
    const char* src = static_cast<const char*>(input);
    for (int r = 0; r < size(); ++r) {
      at::Tensor block = at::zeros({static_cast<int64_t>(most)}, options);
      const size_t bytes = counts[static_cast<size_t>(r)] * elem;
      std::memcpy(block.data_ptr(), src, bytes);
      src += bytes;
      in[0].push_back(block);
    }
  }
  ::c10d::ScatterOptions o;
  o.rootRank = root;
  auto done = Finish(pg_->scatter(out, in, o), "scatter");
  std::memcpy(output, out[0].data_ptr(), counts[static_cast<size_t>(rank())] * elem);
  return done;
}

std::shared_ptr<Work> C10dCommunicator::Alltoallv(const void* input,
                                                  const std::vector<size_t>& send_counts,
                                                  void* output,
                                                  const std::vector<size_t>& recv_counts,
                                                  DataType dtype) {
  auto total = [](const std::vector<size_t>& c) {
    size_t n = 0;
    for (size_t x : c) n += x;
    return n;
  };
  at::Tensor in = View(input, total(send_counts), dtype);
  at::Tensor out = View(output, total(recv_counts), dtype);
  std::vector<int64_t> send(send_counts.begin(), send_counts.end());
  std::vector<int64_t> recv(recv_counts.begin(), recv_counts.end());
  return Finish(pg_->alltoall_base(out, in, recv, send), "alltoall");
}

std::shared_ptr<Work> C10dCommunicator::Barrier() {
  return Finish(pg_->barrier(::c10d::BarrierOptions()), "barrier");
}

std::shared_ptr<Work> C10dCommunicator::Send(const void* data, size_t bytes, int dst) {
  std::vector<at::Tensor> t = {View(data, bytes, DataType::kInt8)};
  return Finish(pg_->send(t, dst, 0), "send");
}

std::shared_ptr<Work> C10dCommunicator::Recv(void* data, size_t bytes, int src) {
  std::vector<at::Tensor> t = {View(data, bytes, DataType::kInt8)};
  return Finish(pg_->recv(t, src, 0), "recv");
}

}  // namespace cdt::python
