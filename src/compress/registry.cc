#include "compress/registry.h"

#include "cdt/error.h"
#include "compress/compressors.h"
#include "compress/error_feedback.h"

namespace cdt::compress {

const std::vector<std::string>& CompressorNames() {
  static const std::vector<std::string> names = {"none", "fp16",    "bf16",     "int8",
                                                 "topk", "randomk", "powersgd", "signsgd"};
  return names;
}

bool IsSparse(const std::string& name) { return name == "topk" || name == "randomk"; }

double DefaultRatio(const std::string& name) {
  return name == "topk" ? 0.01 : name == "randomk" ? 0.75 : 0.0;
}

std::string CompressorNameList() {
  std::string all;
  for (const auto& n : CompressorNames()) all += (all.empty() ? "" : ", ") + n;
  return all;
}

DataType SparseValuesNamed(const std::string& name, const std::string& flag) {
  if (name == "fp32") return DataType::kFloat32;
  if (name == "fp16") return DataType::kFloat16;
  if (name == "bf16") return DataType::kBFloat16;
  throw Error(ErrorCode::kInvalidArgument, flag + " '" + name + "': use fp32, fp16 or bf16");
}

std::unique_ptr<Compressor> MakeCompressor(const std::string& name, const CompressorOptions& o,
                                           const std::vector<TensorView>& tensors) {
  if (!(o.ratio > 0 && o.ratio <= 1) && IsSparse(name))
    throw Error(ErrorCode::kInvalidArgument,
                name + ": the ratio must be in (0, 1], got " + std::to_string(o.ratio));
  if (o.powersgd_rank < 1 && name == "powersgd")
    throw Error(ErrorCode::kInvalidArgument, "powersgd: the rank must be at least 1");
  if (IsSparse(name)) WireValueBytes(o.sparse_values);  // throws for others
  std::unique_ptr<Compressor> c;
  if (name == "none") return MakePlainAllreduce();  // exact: nothing to feed back
  if (name == "fp16")
    c = MakeCast(DataType::kFloat16);
  else if (name == "bf16")
    c = MakeCast(DataType::kBFloat16);
  else if (name == "int8")
    c = MakeInt8(o.int8_chunk, o.seed);
  else if (name == "topk")
    c = MakeTopK(o.ratio, o.sparse_values);
  else if (name == "randomk")
    c = MakeRandomK(o.ratio, o.seed, o.sparse_values);
  else if (name == "powersgd")
    c = MakePowerSgd(o.powersgd_rank, o.seed, tensors, o.powersgd_min_saved_bytes);
  else if (name == "signsgd")
    c = MakeSignSgd(tensors);
  else
    throw Error(ErrorCode::kInvalidArgument,
                "unknown compressor '" + name + "' (use " + CompressorNameList() + ")");
  if (!o.error_feedback) return c;
  return std::make_unique<ErrorFeedback>(std::move(c));
}

}  // namespace cdt::compress
