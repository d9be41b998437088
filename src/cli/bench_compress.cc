#include "cli/bench_compress.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "cdt/error.h"
#include "common/file_io.h"
#include "common/median.h"
#include "common/units.h"
#include "compress/compressor.h"
#include "compress/registry.h"

namespace cdt::cli {

namespace {

// "ROWSxCOLS,N,...": the gradient's tensors, packed one after another.
std::vector<compress::TensorView> ParseShape(const std::string& text) {
  std::vector<compress::TensorView> out;
  std::stringstream in(text);
  std::string item;
  size_t at = 0;
  while (std::getline(in, item, ',')) {
    size_t rows = 0, cols = 1;
    char extra = 0;
    const size_t x = item.find('x');
    const bool ok = x == std::string::npos
                        ? std::sscanf(item.c_str(), "%zu%c", &rows, &extra) == 1
                        : std::sscanf(item.c_str(), "%zux%zu%c", &rows, &cols, &extra) == 2;
    if (!ok || rows == 0 || cols == 0)
      throw Error(
          ErrorCode::kInvalidArgument,
          "--shape: '" + item + "' is not ROWSxCOLS or N (positive integers), in '" + text + "'");
    out.push_back({at, rows, cols});
    at += rows * cols;
  }
  if (out.empty()) throw Error(ErrorCode::kInvalidArgument, "--shape is empty");
  return out;
}

// One matrix as square as the size allows, the remainder as a vector.
std::vector<compress::TensorView> SquareLayout(size_t n) {
  if (n == 0) return {};
  const auto rows = static_cast<size_t>(std::sqrt(static_cast<double>(n)));
  const size_t cols = n / rows;
  std::vector<compress::TensorView> out = {{0, rows, cols}};
  if (rows * cols < n) out.push_back({rows * cols, n - rows * cols, 1});
  return out;
}

std::string Describe(const std::vector<compress::TensorView>& tensors) {
  std::string s;
  for (const auto& t : tensors)
    s += (s.empty() ? "" : ",") + std::to_string(t.rows) +
         (t.cols > 1 ? "x" + std::to_string(t.cols) : "");
  return s;
}

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// The gradient's tensors, from --shape or --size.
std::vector<compress::TensorView> Layout(const BenchCompressOptions& o) {
  if (!o.shape.empty()) return ParseShape(o.shape);
  const size_t bytes = ParseBytes(o.size, "--size");
  if (bytes % 4 != 0)
    throw Error(ErrorCode::kInvalidArgument,
                "--size: " + std::to_string(bytes) +
                    " bytes is not a whole number of float32 values (use a multiple of 4)");
  return SquareLayout(bytes / 4);
}

// The compressors to run, in order: "all" is every one ("none" only with peers to reduce with).
std::vector<std::string> Names(const BenchCompressOptions& o, int world) {
  std::vector<std::string> names;
  if (o.compressors == "all") {
    for (const std::string& name : compress::CompressorNames())
      if (name != "none" || world > 1) names.push_back(name);  // alone, "none" does nothing
    return names;
  }
  const std::vector<std::string>& known = compress::CompressorNames();
  std::stringstream in(o.compressors);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw Error(ErrorCode::kInvalidArgument,
                  "--compressors: unknown compressor '" + name + "' in '" + o.compressors +
                      "' (use all, or some of " + compress::CompressorNameList() + ")");
    names.push_back(name);
  }
  if (names.empty())
    throw Error(ErrorCode::kInvalidArgument, "--compressors is empty (use all, or names)");
  return names;
}

}  // namespace

void ValidateBenchCompressOptions(const BenchCompressOptions& o) {
  if (o.iters < 1 || o.warmup < 0)
    throw Error(ErrorCode::kInvalidArgument,
                "--iters must be at least 1 and --warmup not negative");
  Layout(o);
  Names(o, 1);
  compress::SparseValuesNamed(o.values, "--values");
  if (o.ratio < 0 || o.ratio > 1)
    throw Error(ErrorCode::kInvalidArgument,
                "--ratio " + std::to_string(o.ratio) +
                    ": use a share in (0, 1], or 0 for each compressor's default");
  if (o.powersgd_rank < 1)
    throw Error(ErrorCode::kInvalidArgument, "--powersgd-rank must be at least 1");
}

int RunBenchCompress(Communicator& comm, const BenchCompressOptions& o) {
  ValidateBenchCompressOptions(o);
  const std::vector<compress::TensorView> tensors = Layout(o);
  size_t n = 0;
  for (const auto& t : tensors) n = std::max(n, t.offset + t.numel());
  const DataType values = compress::SparseValuesNamed(o.values, "--values");
  const std::vector<std::string> names = Names(o, comm.size());

  std::mt19937_64 rng(1000003ull * static_cast<uint64_t>(comm.rank() + 1));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> gradient(n);
  for (float& g : gradient) g = normal(rng);
  // The exact sum, for the error column.
  std::vector<float> exact = gradient;
  if (n > 0) comm.Allreduce(exact.data(), n, DataType::kFloat32, ReduceOp::kSum)->Wait();
  const double exact_norm = Norm(exact);

  const bool lead = comm.rank() == 0;
  const double fp32_bytes = 4.0 * static_cast<double>(n);
  if (lead) {
    std::printf(
        "# cann-dist-train compress: %d rank(s), gradient %zu floats (%.1f MiB) as %s, "
        "Gaussian values, error feedback %s\n",
        comm.size(), n, fp32_bytes / (1 << 20), Describe(tensors).c_str(),
        o.error_feedback ? "on" : "off");
    std::printf("# time = median of %d call(s), slowest rank%s; GB/s = fp32 bytes / time\n",
                o.iters,
                comm.size() == 1 ? " (one rank: encode + decode, collectives are no-ops)"
                                 : " (encode + communication + decode)");
    std::printf("%10s %8s %10s %10s %14s %10s %10s\n", "compressor", "param", "time_ms", "GBps",
                "wire_bytes", "reduction", "rel_error");
  }
  nlohmann::json rows = nlohmann::json::array();
  std::vector<float> work(n), local(n);
  for (const std::string& name : names) {
    const compress::Method method = compress::MethodNamed(name);  // checked: Names
    compress::CompressorOptions co;
    co.ratio = o.ratio > 0 ? o.ratio : compress::DefaultRatio(method);
    co.powersgd_rank = o.powersgd_rank;
    co.error_feedback = o.error_feedback;
    co.sparse_values = values;
    // One call of a fresh compressor (no residual yet) against the exact sum.
    std::unique_ptr<compress::Compressor> c = compress::MakeCompressor(method, co, tensors);
    work = gradient;
    const size_t wire = n > 0 ? c->Reduce(comm, work.data(), local.data(), n) : 0;
    double diff = 0;
    for (size_t i = 0; i < n; ++i) diff += std::pow(static_cast<double>(work[i]) - exact[i], 2);
    const double rel_error = exact_norm > 0 ? std::sqrt(diff) / exact_norm : 0;

    std::vector<double> seconds;
    for (int i = 0; i < o.warmup + o.iters; ++i) {
      std::memcpy(work.data(), gradient.data(), n * sizeof(float));
      comm.Barrier()->Wait();
      const auto start = std::chrono::steady_clock::now();
      c->Reduce(comm, work.data(), local.data(), n);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (i >= o.warmup) seconds.push_back(s);
    }
    double t = Median(seconds);
    comm.Allreduce(&t, 1, DataType::kFloat64, ReduceOp::kMax,
                   {AllreduceAlgorithm::kRecursiveDoubling})
        ->Wait();
    const double gbps = t > 0 ? fp32_bytes / t / 1e9 : 0;
    const double reduction = n > 0 ? 1.0 - static_cast<double>(wire) / fp32_bytes : 0;
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "k=%g%s", co.ratio,
                  o.values == "fp32" ? "" : ("/" + o.values).c_str());
    std::string param = compress::IsSparse(method) ? std::string(ratio)
                        : name == "powersgd"     ? "r=" + std::to_string(co.powersgd_rank)
                                                 : "-";
    if (lead) {
      std::printf("%10s %8s %10.2f %10.3f %14zu %9.1f%% %10.4f\n", name.c_str(), param.c_str(),
                  t * 1e3, gbps, wire, 100 * reduction, rel_error);
      std::fflush(stdout);
      rows.push_back({{"compressor", name},
                      {"param", param},
                      {"time_ms", t * 1e3},
                      {"GBps", gbps},
                      {"wire_bytes", wire},
                      {"volume_reduction", reduction},
                      {"rel_error", rel_error},
                      {"iters", o.iters}});
    }
  }
  if (lead && !o.json.empty()) {
    nlohmann::json doc = {{"world_size", comm.size()},
                          {"elements", n},
                          {"layout", Describe(tensors)},
                          {"error_feedback", o.error_feedback},
                          {"results", rows}};
    WriteFileAtomically(o.json, doc.dump(2) + "\n");
  }
  return 0;
}

}  // namespace cdt::cli
