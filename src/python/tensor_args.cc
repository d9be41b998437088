#include "python/tensor_args.h"

#include <c10/util/Exception.h>

#include <string>

#include "cdt/error.h"

namespace cdt::python {

DataType ToDataType(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return DataType::kFloat32;
    case at::kDouble:
      return DataType::kFloat64;
    case at::kHalf:
      return DataType::kFloat16;
    case at::kBFloat16:
      return DataType::kBFloat16;
    case at::kInt:
      return DataType::kInt32;
    case at::kLong:
      return DataType::kInt64;
    case at::kChar:
      return DataType::kInt8;
    case at::kByte:
      return DataType::kUInt8;
    case at::kBool:
      return DataType::kBool;
    case at::kShort:
      return DataType::kInt16;
    default:  // complex tensors never get here: torch reduces them as their real views
      TORCH_CHECK(false, "cdt backend: ", call, ": tensors of ", t.scalar_type(),
                  " cannot be reduced (float32, float64, float16, bfloat16, int64, int32, int16, "
                  "int8, uint8, bool can)");
  }
  return DataType::kFloat32;
}

ReduceOp ToReduceOp(const ::c10d::ReduceOp& op, DataType dtype, const char* call) {
  ReduceOp r = ReduceOp::kSum;
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM:
      r = ReduceOp::kSum;
      break;
    case ::c10d::ReduceOp::AVG:
      r = ReduceOp::kAvg;
      break;
    case ::c10d::ReduceOp::MAX:
      r = ReduceOp::kMax;
      break;
    case ::c10d::ReduceOp::MIN:
      r = ReduceOp::kMin;
      break;
    case ::c10d::ReduceOp::PRODUCT:
      r = ReduceOp::kProduct;
      break;
    case ::c10d::ReduceOp::BAND:
      r = ReduceOp::kBand;
      break;
    case ::c10d::ReduceOp::BOR:
      r = ReduceOp::kBor;
      break;
    case ::c10d::ReduceOp::BXOR:
      r = ReduceOp::kBxor;
      break;
#if TORCH_VERSION_MAJOR >= 2
    case ::c10d::ReduceOp::PREMUL_SUM:  // the factor is applied before (Premultiplied)
      TORCH_CHECK(dtype == DataType::kFloat32 || dtype == DataType::kFloat64 ||
                      dtype == DataType::kFloat16 || dtype == DataType::kBFloat16,
                  "cdt backend: ", call,
                  ": PREMUL_SUM applies to floating-point tensors (float32, float64, float16, "
                  "bfloat16)");
      r = ReduceOp::kSum;
      break;
#endif
    default:
      TORCH_CHECK(false, "cdt backend: ", call,
                  ": this reduce op is not supported (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, "
                  "BXOR, and PREMUL_SUM on PyTorch 2.x)");
  }
  try {
    CheckReduceOp(r, dtype, call);
  } catch (const Error& e) {
    TORCH_CHECK(false, "cdt backend: ", e.what());
  }
  return r;
}

void CheckDense(const at::Tensor& t, const char* call) {
  TORCH_CHECK(t.device().is_cpu(), "cdt backend: ", call, ": tensors must be on the CPU, not ",
              t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "cdt backend: ", call,
              ": sparse tensors are not supported");
}

const at::Tensor& One(const std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "cdt backend: ", call, ": one tensor per call (got ",
              tensors.size(), ")");
  CheckDense(tensors[0], call);
  return tensors[0];
}

at::Tensor Contiguous(const at::Tensor& t, std::function<void()>* after) {
  if (t.is_contiguous()) return t;
  at::Tensor c = t.contiguous();
  *after = [t, c]() mutable { t.copy_(c); };
  return c;
}

void CheckList(const std::vector<at::Tensor>& list, size_t count, const at::Tensor& like,
               const char* call, const char* what) {
  TORCH_CHECK(list.size() == count, "cdt backend: ", call, ": ", what, " must hold ", count,
              " tensor(s), one per rank (got ", list.size(), ")");
  for (const at::Tensor& t : list) {
    CheckDense(t, call);
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(),
                "cdt backend: ", call, ": every tensor of ", what, " must have ", like.numel(),
                " element(s) of ", like.scalar_type(), " (got ", t.numel(), " of ", t.scalar_type(),
                ")");
  }
}

at::Tensor Premultiplied(const ::c10d::ReduceOp& op, const at::Tensor& c, bool in_place) {
#if TORCH_VERSION_MAJOR >= 2
  if (op.op_ == ::c10d::ReduceOp::PREMUL_SUM) {
    const auto* s = dynamic_cast<const ::c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(s != nullptr, "cdt backend: PREMUL_SUM without its factor (make it with "
                              "torch.distributed._make_nccl_premul_sum)");
    if (s->tensor_factor.defined()) {
      const at::Tensor f = s->tensor_factor.to(at::kCPU);
      return in_place ? c.mul_(f) : c.mul(f);
    }
    return in_place ? c.mul_(s->double_factor) : c.mul(s->double_factor);
  }
#endif
  return c;
}

}  // namespace cdt::python
