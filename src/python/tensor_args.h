// How the "cdt" torch.distributed backend reads its tensor arguments: torch dtypes and reduce ops
// as the engine's, dense CPU tensors checked, contiguous working copies. Every check raises a
// torch error (a RuntimeError in Python) naming the call and what it accepts.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/version.h>

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "cdt/types.h"

namespace cdt::python {

// Data movement (broadcast, gather, all_to_all ...) needs no arithmetic: any dtype travels as its
// bytes.
constexpr DataType kBytes = DataType::kInt8;

// The engine's type for a tensor that is reduced: float32, float64, float16, bfloat16, int64,
// int32, int16, int8, uint8, bool.
DataType ToDataType(const at::Tensor& t, const char* call);
// The engine's op for `op` on elements of `dtype` (SUM, AVG, PRODUCT, MIN, MAX; BAND, BOR, BXOR
// on integer and bool tensors; PREMUL_SUM on floating-point ones, with Premultiplied).
ReduceOp ToReduceOp(const ::c10d::ReduceOp& op, DataType dtype, const char* call);

// PREMUL_SUM (PyTorch 2.x: torch.distributed._make_nccl_premul_sum(factor), which FSDP and
// DeepSpeed use to fold the 1/world of an average into the sum) is a SUM of each rank's tensor
// multiplied by the factor first: ToReduceOp gives kSum for it, and this gives `c` multiplied by
// the factor (a number or a one-element tensor) — in place when `in_place` (where the collective
// overwrites `c` anyway), else in a new tensor. `c` itself for every other op.
at::Tensor Premultiplied(const ::c10d::ReduceOp& op, const at::Tensor& c, bool in_place);

// A dense CPU tensor, or a torch error naming `call`.
void CheckDense(const at::Tensor& t, const char* call);
// The one dense tensor of a list (the backend takes one tensor per call, as Gloo's CPU path).
const at::Tensor& One(const std::vector<at::Tensor>& tensors, const char* call);
// The tensor the engine works in: `t` itself when contiguous, else a contiguous copy that
// `after` writes back.
at::Tensor Contiguous(const at::Tensor& t, std::function<void()>* after);
// A list of `count` dense tensors of `like`'s size and dtype (gather's outputs, scatter's
// inputs, all_gather's outputs), or a torch error naming `call` and `what`.
void CheckList(const std::vector<at::Tensor>& list, size_t count, const at::Tensor& like,
               const char* call, const char* what);

}  // namespace cdt::python
