// ProcessGroupCDT's calls beyond what DDP uses: the rooted collectives (reduce, gather, scatter),
// all-to-all with uneven splits (the MoE layer's exchange), and the coalesced forms. Each maps to
// one engine collective (include/cdt/communicator.h) on a contiguous staging tensor, and copies
// into the caller's tensors on the completion thread once it succeeded. Semantics follow
// ProcessGroupGloo's CPU path (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp), which the tests
// compare against (tests/python/test_ops.py).
#include <ATen/ATen.h>

#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "python/process_group.h"
#include "python/tensor_args.h"

namespace cdt::python {

namespace {

// Every tensor of `tensors` flattened into one, in order (all of `dtype`).
at::Tensor Flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive slices of the flat byte tensor `from` (starting at `offset` bytes) into
// `into`, each its own size (byte slices need not be aligned for the tensors' types).
void Unflatten(const at::Tensor& from, size_t offset, std::vector<at::Tensor>& into) {
  for (at::Tensor& t : into) {
    const int64_t bytes = t.numel() * t.element_size();
    at::Tensor dst = t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous);
    if (bytes > 0)
      dst.reshape({-1}).view(at::kByte).copy_(from.narrow(0, static_cast<int64_t>(offset), bytes));
    if (!dst.is_same(t)) t.copy_(dst);
    offset += static_cast<size_t>(bytes);
  }
}

// A tensor's elements as bytes (the engine moves data as bytes, kBytes).
at::Tensor Bytes(const at::Tensor& t) { return t.contiguous().reshape({-1}).view(at::kByte); }

// The byte count of each rank's block of an alltoall_base tensor: `splits` rows of `row_bytes`
// each, or equal blocks when `splits` is empty (torch's convention).
std::vector<size_t> SplitBytes(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                               const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const size_t row_bytes = rows == 0 ? 0 : static_cast<size_t>(t.numel() * t.element_size() / rows);
  std::vector<size_t> bytes;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "cdt backend: alltoall_base: the ", what,
                " tensor's first "
                "dimension (",
                rows, ") does not divide into ", size, " equal splits; pass ", what,
                "_split_sizes");
    bytes.assign(static_cast<size_t>(size), static_cast<size_t>(rows / size) * row_bytes);
    return bytes;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "cdt backend: alltoall_base: ", what,
              "_split_sizes has ", splits.size(), " entries for a group of ", size);
  int64_t total = 0;
  for (int64_t s : splits) {
    TORCH_CHECK(s >= 0, "cdt backend: alltoall_base: ", what, "_split_sizes holds ", s);
    total += s;
    bytes.push_back(static_cast<size_t>(s) * row_bytes);
  }
  TORCH_CHECK(total == rows, "cdt backend: alltoall_base: ", what, "_split_sizes add up to ", total,
              " but the ", what, " tensor has ", rows, " rows");
  return bytes;
}

}  // namespace

void ProcessGroupCDT::CheckRoot(int64_t root, const char* call) const {
  TORCH_CHECK(root >= 0 && root < getSize(), "cdt backend: ", call, ": root ", root,
              " is not a rank of this group of ", getSize());
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  TORCH_CHECK(!tensors.empty(), "cdt backend: allreduce_coalesced: no tensors");
  for (const at::Tensor& t : tensors) {
    CheckDense(t, "allreduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "cdt backend: allreduce_coalesced: every tensor must be of one dtype (",
                tensors[0].scalar_type(), " and ", t.scalar_type(), " given)");
  }
  const DataType dtype = ToDataType(tensors[0], "allreduce_coalesced");
  const ReduceOp op = ToReduceOp(opts.reduceOp, dtype, "allreduce_coalesced");
  at::Tensor flat = Premultiplied(opts.reduceOp, Flatten(tensors), /*in_place=*/true);
  auto work = Comm("allreduce_coalesced")
                  .Allreduce(flat.data_ptr(), static_cast<size_t>(flat.numel()), dtype, op);
  std::vector<at::Tensor> outs = tensors;
  auto after = [outs, flat]() mutable { Unflatten(flat.view(at::kByte), 0, outs); };  // same dtype
  return Track(::c10d::OpType::ALLREDUCE_COALESCED, std::move(work), tensors, std::move(after));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::reduce(std::vector<at::Tensor>& tensors,
                                                         const ::c10d::ReduceOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const at::Tensor& t = One(tensors, "reduce");
  CheckRoot(opts.rootRank, "reduce");
  const DataType dtype = ToDataType(t, "reduce");
  const ReduceOp op = ToReduceOp(opts.reduceOp, dtype, "reduce");
  std::function<void()> after;
  at::Tensor c = Contiguous(t, &after);
  const at::Tensor scaled = Premultiplied(opts.reduceOp, c, /*in_place=*/false);
  if (!scaled.is_same(c)) {  // PREMUL_SUM: the others' tensors stay as they were, the root's
    const bool root = opts.rootRank == getRank();  // receives the result
    after = [after, c, scaled, root]() mutable {
      if (!root) return;
      c.copy_(scaled);
      if (after) after();
    };
  }
  auto work = Comm("reduce").Reduce(scaled.data_ptr(), static_cast<size_t>(c.numel()), dtype, op,
                                    static_cast<int>(opts.rootRank));
  return Track(::c10d::OpType::REDUCE, std::move(work), tensors, std::move(after));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions&) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  TORCH_CHECK(static_cast<int>(output_lists.size()) == getSize(),
              "cdt backend: allgather_coalesced: one output list per rank (", getSize(), "), got ",
              output_lists.size());
  size_t bytes = 0;
  std::vector<at::Tensor> flat_inputs;
  for (const at::Tensor& in : inputs) {
    CheckDense(in, "allgather_coalesced");
    bytes += static_cast<size_t>(in.numel() * in.element_size());
    flat_inputs.push_back(Bytes(in));
  }
  for (const auto& list : output_lists) {
    TORCH_CHECK(list.size() == inputs.size(),
                "cdt backend: allgather_coalesced: every output "
                "list must hold one tensor per input (",
                inputs.size(), ")");
    for (size_t i = 0; i < list.size(); ++i) {
      CheckDense(list[i], "allgather_coalesced");
      TORCH_CHECK(
          list[i].numel() == inputs[i].numel() && list[i].scalar_type() == inputs[i].scalar_type(),
          "cdt backend: allgather_coalesced: output ", i, " must match input ", i,
          "'s size and dtype");
    }
  }
  const at::Tensor src = flat_inputs.empty() ? at::empty({0}, at::kByte) : at::cat(flat_inputs);
  at::Tensor all = at::empty({static_cast<int64_t>(bytes) * getSize()}, at::kByte);
  auto work = Comm("allgather_coalesced").Allgather(src.data_ptr(), all.data_ptr(), bytes, kBytes);
  std::vector<std::vector<at::Tensor>> outs = output_lists;
  auto after = [outs, all, src, bytes]() mutable {
    for (size_t r = 0; r < outs.size(); ++r) Unflatten(all, r * bytes, outs[r]);
  };
  std::vector<at::Tensor> results;
  for (const auto& list : output_lists) results.insert(results.end(), list.begin(), list.end());
  return Track(::c10d::OpType::ALLGATHER_COALESCED, std::move(work), std::move(results),
               std::move(after));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::GatherOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const at::Tensor& in = One(inputs, "gather");
  CheckRoot(opts.rootRank, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const bool at_root = getRank() == root;
  if (at_root) {
    TORCH_CHECK(outputs.size() == 1, "cdt backend: gather: the root passes one output list");
    CheckList(outputs[0], static_cast<size_t>(getSize()), in, "gather", "gather_list");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "cdt backend: gather: only the root (rank ", root, ") passes a gather_list");
  }
  const at::Tensor src = Bytes(in);
  const size_t bytes = static_cast<size_t>(src.numel());
  at::Tensor all = at::empty({at_root ? static_cast<int64_t>(bytes) * getSize() : 0}, at::kByte);
  auto work = Comm("gather").Gatherv(src.data_ptr(), at_root ? all.data_ptr() : nullptr,
                                     std::vector<size_t>(getSize(), bytes), kBytes, root);
  std::vector<at::Tensor> outs = at_root ? outputs[0] : std::vector<at::Tensor>{};
  auto after = [outs, all, src]() mutable { Unflatten(all, 0, outs); };
  return Track(::c10d::OpType::GATHER, std::move(work), outs, std::move(after));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ScatterOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const at::Tensor& out = One(outputs, "scatter");
  CheckRoot(opts.rootRank, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const bool at_root = getRank() == root;
  at::Tensor src = at::empty({0}, at::kByte);
  if (at_root) {
    TORCH_CHECK(inputs.size() == 1, "cdt backend: scatter: the root passes one input list");
    CheckList(inputs[0], static_cast<size_t>(getSize()), out, "scatter", "scatter_list");
    std::vector<at::Tensor> bytes;
    for (const at::Tensor& t : inputs[0]) bytes.push_back(Bytes(t));
    src = at::cat(bytes);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "cdt backend: scatter: only the root (rank ", root, ") passes a scatter_list");
  }
  std::function<void()> after;
  at::Tensor o = Contiguous(out, &after);
  const size_t bytes = static_cast<size_t>(o.numel() * o.element_size());
  auto work = Comm("scatter").Scatterv(at_root ? src.data_ptr() : nullptr, o.data_ptr(),
                                       std::vector<size_t>(getSize(), bytes), kBytes, root);
  auto keep = [after, src]() {
    if (after) after();
  };
  return Track(::c10d::OpType::SCATTER, std::move(work), outputs, std::move(keep));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::alltoall_base(at::Tensor& output,
                                                                at::Tensor& input,
                                                                std::vector<int64_t>& output_splits,
                                                                std::vector<int64_t>& input_splits,
                                                                const ::c10d::AllToAllOptions&) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  CheckDense(input, "alltoall_base");
  CheckDense(output, "alltoall_base");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(),
              "cdt backend: alltoall_base: input and output must share a dtype (",
              input.scalar_type(), " and ", output.scalar_type(), " given)");
  const std::vector<size_t> send = SplitBytes(input, input_splits, getSize(), "input");
  const std::vector<size_t> recv = SplitBytes(output, output_splits, getSize(), "output");
  // The engine wants input and output apart: a copy of the input when they share memory.
  at::Tensor src = input.contiguous();
  std::function<void()> after;
  at::Tensor o = Contiguous(output, &after);
  if (src.numel() > 0 && o.numel() > 0 && src.data_ptr() == o.data_ptr()) src = src.clone();
  auto work = Comm("alltoall_base").Alltoallv(src.data_ptr(), send, o.data_ptr(), recv, kBytes);
  auto keep = [after, src]() {
    if (after) after();
  };
  return Track(::c10d::OpType::ALLTOALL_BASE, std::move(work), {output}, std::move(keep));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const ::c10d::AllToAllOptions&) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  TORCH_CHECK(
      static_cast<int>(inputs.size()) == getSize() && static_cast<int>(outputs.size()) == getSize(),
      "cdt backend: alltoall: one input and one output tensor per rank (", getSize(), "), got ",
      inputs.size(), " and ", outputs.size());
  std::vector<size_t> send, recv;
  std::vector<at::Tensor> bytes;
  for (const at::Tensor& t : inputs) {
    CheckDense(t, "alltoall");
    send.push_back(static_cast<size_t>(t.numel() * t.element_size()));
    bytes.push_back(Bytes(t));
  }
  for (const at::Tensor& t : outputs) {
    CheckDense(t, "alltoall");
    TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(),
                "cdt backend: alltoall: every tensor must be of one dtype");
    recv.push_back(static_cast<size_t>(t.numel() * t.element_size()));
  }
  const at::Tensor src = at::cat(bytes);
  at::Tensor all = at::empty(
      {static_cast<int64_t>(std::accumulate(recv.begin(), recv.end(), size_t{0}))}, at::kByte);
  auto work = Comm("alltoall").Alltoallv(src.data_ptr(), send, all.data_ptr(), recv, kBytes);
  std::vector<at::Tensor> outs = outputs;
  auto after = [outs, all, src]() mutable { Unflatten(all, 0, outs); };
  return Track(::c10d::OpType::ALLTOALL, std::move(work), outputs, std::move(after));
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions&) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const char* call = "allgather_into_tensor_coalesced";
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "cdt backend: ", call,
              ": one output per input (", inputs.size(), " inputs, ", outputs.size(), " outputs)");
  std::vector<at::Tensor> blocks;  // this rank's block: every input's bytes, in order
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckDense(inputs[i], call);
    CheckDense(outputs[i], call);
    TORCH_CHECK(outputs[i].numel() == getSize() * inputs[i].numel() &&
                    outputs[i].scalar_type() == inputs[i].scalar_type(),
                "cdt backend: ", call, ": output ", i, " must hold world size x input ", i);
    blocks.push_back(Bytes(inputs[i]));
  }
  const at::Tensor src = at::cat(blocks);
  const int64_t block = src.numel();
  at::Tensor flat = at::empty({getSize() * block}, src.options());
  auto work = Comm(call).Allgather(src.data_ptr(), flat.data_ptr(), static_cast<size_t>(block),
                                   kBytes);
  std::vector<at::Tensor> outs = outputs;
  auto after = [outs, flat, src, block, size = getSize()]() mutable {
    int64_t offset = 0;  // of input i's bytes within a rank's block
    for (at::Tensor& o : outs) {
      const int64_t bytes = o.numel() * o.element_size() / size;
      at::Tensor dst = o.is_contiguous() ? o : at::empty_like(o, at::MemoryFormat::Contiguous);
      at::Tensor dst_bytes = dst.reshape({-1}).view(at::kByte);
      for (int64_t r = 0; r < size && bytes > 0; ++r)
        dst_bytes.narrow(0, r * bytes, bytes).copy_(flat.narrow(0, r * block + offset, bytes));
      if (!dst.is_same(o)) o.copy_(dst);
      offset += bytes;
    }
  };
  return Track(::c10d::OpType::COALESCED, std::move(work), outputs, std::move(after));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupCDT::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::mutex> lock(mu_);  // against Detach()
  const char* call = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "cdt backend: ", call,
              ": one output per input (", inputs.size(), " inputs, ", outputs.size(), " outputs)");
  int64_t total = 0;  // elements a rank receives
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckDense(inputs[i], call);
    CheckDense(outputs[i], call);
    TORCH_CHECK(inputs[i].numel() == getSize() * outputs[i].numel() &&
                    outputs[i].scalar_type() == outputs[0].scalar_type() &&
                    inputs[i].scalar_type() == outputs[0].scalar_type(),
                "cdt backend: ", call, ": input ", i, " must hold world size x output ", i,
                ", all of one dtype");
    total += outputs[i].numel();
  }
  const DataType dtype = ToDataType(outputs[0], call);
  const ReduceOp op = ToReduceOp(opts.reduceOp, dtype, call);
  std::vector<at::Tensor> pieces;  // rank r's block: every input's r-th chunk, in order
  for (int64_t r = 0; r < getSize(); ++r) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t n = outputs[i].numel();
      pieces.push_back(inputs[i].reshape({-1}).narrow(0, r * n, n));
    }
  }
  const at::Tensor src = Premultiplied(opts.reduceOp, at::cat(pieces), /*in_place=*/true);
  at::Tensor out = at::empty({total}, outputs[0].options());
  auto work = Comm(call).ReduceScatter(src.data_ptr(), out.data_ptr(),
                                       std::vector<size_t>(getSize(), total), dtype, op);
  std::vector<at::Tensor> outs = outputs;
  auto after = [outs, out, src]() mutable { Unflatten(out.view(at::kByte), 0, outs); };
  return Track(::c10d::OpType::COALESCED, std::move(work), outputs, std::move(after));
}
#endif

}  // namespace cdt::python
