#include "compress/registry.h"

#include "cdt/error.h"
#include "compress/compressors.h"
#include "compress/error_feedback.h"

namespace cdt::compress {

namespace {

struct Named {
  Method method;
  const char* name;
};
constexpr Named kMethods[] = {
    {Method::kNone, "none"},       {Method::kFp16, "fp16"},       {Method::kBf16, "bf16"},
    {Method::kInt8, "int8"},       {Method::kTopK, "topk"},       {Method::kRandomK, "randomk"},
    {Method::kPowerSgd, "powersgd"}, {Method::kSignSgd, "signsgd"},
};

}  // namespace

std::optional<Method> ParseMethod(std::string_view name) {
  for (const Named& m : kMethods)
    if (name == m.name) return m.method;
  return std::nullopt;
}

Method MethodNamed(const std::string& name, const std::string& flag) {
  if (const auto m = ParseMethod(name)) return *m;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown " + flag + " '" + name + "' (use " + CompressorNameList() + ")");
}

const char* MethodName(Method method) {
  for (const Named& m : kMethods)
    if (m.method == method) return m.name;
  return "?";
}

const std::vector<std::string>& CompressorNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Named& m : kMethods) v.push_back(m.name);
    return v;
  }();
  return names;
}

bool IsSparse(Method m) { return m == Method::kTopK || m == Method::kRandomK; }

double DefaultRatio(Method m) {
  return m == Method::kTopK ? 0.01 : m == Method::kRandomK ? 0.75 : 0.0;
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

std::unique_ptr<Compressor> MakeCompressor(Method method, const CompressorOptions& o,
                                           const std::vector<TensorView>& tensors) {
  const std::string name = MethodName(method);
  if (!(o.ratio > 0 && o.ratio <= 1) && IsSparse(method))
    throw Error(ErrorCode::kInvalidArgument,
                name + ": the ratio must be in (0, 1], got " + std::to_string(o.ratio));
  if (o.powersgd_rank < 1 && method == Method::kPowerSgd)
    throw Error(ErrorCode::kInvalidArgument, "powersgd: the rank must be at least 1");
  if (IsSparse(method)) WireValueBytes(o.sparse_values);  // throws for others
  std::unique_ptr<Compressor> c;
  switch (method) {
    case Method::kNone: return MakePlainAllreduce();  // exact: nothing to feed back
    case Method::kFp16: c = MakeCast(DataType::kFloat16); break;
    case Method::kBf16: c = MakeCast(DataType::kBFloat16); break;
    case Method::kInt8: c = MakeInt8(o.int8_chunk, o.seed); break;
    case Method::kTopK: c = MakeTopK(o.ratio, o.sparse_values); break;
    case Method::kRandomK: c = MakeRandomK(o.ratio, o.seed, o.sparse_values); break;
    case Method::kPowerSgd:
      c = MakePowerSgd(o.powersgd_rank, o.seed, tensors, o.powersgd_min_saved_bytes);
      break;
    case Method::kSignSgd: c = MakeSignSgd(tensors); break;
  }
  if (!o.error_feedback) return c;
  return std::make_unique<ErrorFeedback>(std::move(c));
}

std::unique_ptr<Compressor> MakeCompressor(const std::string& name, const CompressorOptions& o,
                                           const std::vector<TensorView>& tensors) {
  return MakeCompressor(MethodNamed(name), o, tensors);
}

}  // namespace cdt::compress
