#include "sim/model_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sim/json_read.h"

namespace cdt::sim {

double ModelProfile::gradient_bytes() const {
  double sum = 0;
  for (double b : bucket_bytes) sum += b;
  return sum;
}

ComputePoint ModelProfile::StepAt(int batch, int threads) const {
  if (compute.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "model profile '" + model + "': no compute points (run `cann-dist-train profile`)");
  // The measured thread count nearest to the one asked for.
  int nearest = compute.front().threads;
  for (const ComputePoint& p : compute)
    if (std::abs(p.threads - threads) < std::abs(nearest - threads)) nearest = p.threads;
  std::vector<const ComputePoint*> pts;
  for (const ComputePoint& p : compute)
    if (p.threads == nearest) pts.push_back(&p);
  auto total = [](const ComputePoint& p) {
    return p.forward_s + p.backward_s + p.optimizer_s + p.other_s;
  };
  // Least squares: total = a + b·batch over the points (one point: proportional to the batch
  // beyond it, the fixed part unknown and so taken as none).
  double a = 0, b = 0;
  if (pts.size() == 1) {
    b = total(*pts[0]) / std::max(1, pts[0]->batch);
  } else {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const ComputePoint* p : pts) {
      sx += p->batch;
      sy += total(*p);
      sxx += double(p->batch) * p->batch;
      sxy += p->batch * total(*p);
    }
    const double n = double(pts.size()), den = n * sxx - sx * sx;
    b = den > 0 ? (n * sxy - sx * sy) / den : sy / std::max(1.0, sx);
    a = (sy - b * sx) / n;
    if (a < 0 || b < 0) {  // noise made the line absurd: proportional through the mean
      a = 0;
      b = sy / std::max(1.0, sx);
    }
  }
  // Phases in the proportions of the point nearest in batch size.
  const ComputePoint* near = pts.front();
  for (const ComputePoint* p : pts)
    if (std::abs(p->batch - batch) < std::abs(near->batch - batch)) near = p;
  const double want = a + b * batch, have = std::max(1e-12, total(*near));
  ComputePoint out = *near;
  out.batch = batch;
  out.threads = threads;
  const double k = want / have;
  out.forward_s *= k;
  out.backward_s *= k;
  out.optimizer_s *= k;
  out.other_s *= k;
  out.step_sd_s *= k;
  return out;
}

const CompressionCost* ModelProfile::Compressor(const std::string& name) const {
  for (const CompressionCost& c : compression)
    if (c.name == name) return &c;
  return nullptr;
}

std::string Num(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

ModelProfile ParseModelProfile(const std::string& text, const std::string& where) {
  const nlohmann::json doc = JsonReader::Parse(text, where);
  const JsonReader r(doc, where);
  if (r.String("format", "") != "cdt-model-profile")
    r.Fail("format",
           "expected \"cdt-model-profile\" (a file written by `cann-dist-train profile`)");
  if (r.Number("version", 1, 1, true) != 1) r.Fail("version", "this build reads version 1");
  ModelProfile p;
  p.model = r.String("model", "", true);
  p.source = r.String("source", "");
  p.parameters = r.Integer("parameters", 1, kMaxParameters, 0, true);
  p.device = r.String("device", "");
  p.device_tflops = r.Number("device_tflops", 0, 0);
  r.Each("bucket_bytes", [&](const JsonReader&, const nlohmann::json& v) {
    // Bounded: a bucket's size becomes a message size (size_t) in the simulated collectives.
    if (!v.is_number() || !(v.get<double>() > 0) || !(v.get<double>() <= kMaxBucketBytes))
      r.Fail("bucket_bytes", "expected positive numbers of at most 10^16 bytes");
    p.bucket_bytes.push_back(v.get<double>());
  });
  if (p.bucket_bytes.size() > 100000) r.Fail("bucket_bytes", "at most 100,000 buckets");
  if (p.bucket_bytes.empty()) p.bucket_bytes.push_back(4.0 * p.parameters);
  r.Each("bucket_priority", [&](const JsonReader&, const nlohmann::json& v) {
    if (!v.is_boolean()) r.Fail("bucket_priority", "expected true or false per bucket");
    p.bucket_priority.push_back(v.get<bool>());
  });
  if (!p.bucket_priority.empty() && p.bucket_priority.size() != p.bucket_bytes.size())
    r.Fail("bucket_priority", "needs one entry per bucket of bucket_bytes");
  r.Each("bucket_ready_fraction", [&](const JsonReader&, const nlohmann::json& v) {
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
      r.Fail("bucket_ready_fraction", "expected numbers between 0 and 1");
    p.bucket_ready_fraction.push_back(v.get<double>());
  });
  if (!p.bucket_ready_fraction.empty() && p.bucket_ready_fraction.size() != p.bucket_bytes.size())
    r.Fail("bucket_ready_fraction", "needs one entry per bucket of bucket_bytes");
  p.comm_wakeup_s = r.Number("comm_wakeup_s", 0, 0);
  p.loaded_alpha_s = r.Number("loaded_alpha_s", 0, 0);
  p.loaded_s_per_byte = r.Number("loaded_s_per_byte", 0, 0);
  r.Each("compute", [&](const JsonReader& c, const nlohmann::json&) {
    ComputePoint pt;
    pt.batch = static_cast<int>(c.Integer("batch", 1, 10000000, 0, true));
    pt.threads = static_cast<int>(c.Integer("threads", 0, 1000000, 1));
    pt.forward_s = c.Number("forward_s", 0, 0, true);
    pt.backward_s = c.Number("backward_s", 0, 0, true);
    pt.optimizer_s = c.Number("optimizer_s", 0, 0);
    pt.other_s = c.Number("other_s", 0, 0);
    pt.step_sd_s = c.Number("step_sd_s", 0, 0);
    p.compute.push_back(pt);
  });
  if (p.compute.empty()) r.Fail("compute", "expected at least one measured step");
  r.Each("compression", [&](const JsonReader& c, const nlohmann::json&) {
    CompressionCost cc;
    cc.name = c.String("name", "", true);
    cc.wire_ratio = c.Number("wire_ratio", 1, 1, true);
    cc.seconds_per_byte = c.Number("seconds_per_byte", 0, 0, true);
    p.compression.push_back(cc);
  });
  return p;
}

std::string ModelProfileJson(const ModelProfile& p) {
  nlohmann::json j = {{"format", "cdt-model-profile"},
                      {"version", 1},
                      {"model", p.model},
                      {"source", p.source},
                      {"parameters", p.parameters},
                      {"device", p.device},
                      {"device_tflops", p.device_tflops},
                      {"bucket_bytes", p.bucket_bytes},
                      {"bucket_priority", p.bucket_priority},
                      {"bucket_ready_fraction", p.bucket_ready_fraction},
                      {"comm_wakeup_s", p.comm_wakeup_s},
                      {"loaded_alpha_s", p.loaded_alpha_s},
                      {"loaded_s_per_byte", p.loaded_s_per_byte}};
  j["compute"] = nlohmann::json::array();
  for (const ComputePoint& c : p.compute)
    j["compute"].push_back({{"batch", c.batch},
                            {"threads", c.threads},
                            {"forward_s", c.forward_s},
                            {"backward_s", c.backward_s},
                            {"optimizer_s", c.optimizer_s},
                            {"other_s", c.other_s},
                            {"step_sd_s", c.step_sd_s}});
  j["compression"] = nlohmann::json::array();
  for (const CompressionCost& c : p.compression)
    j["compression"].push_back(
        {{"name", c.name}, {"wire_ratio", c.wire_ratio}, {"seconds_per_byte", c.seconds_per_byte}});
  return j.dump(1) + "\n";
}

}  // namespace cdt::sim
