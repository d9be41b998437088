// The live document of a running training (docs/dashboard.md, "The live document").
#include "train/live_metrics.h"

#include "train/result_json_parts.h"

namespace cdt::train {

namespace {

nlohmann::json CommJson(const CommStats& s) {
  nlohmann::json algos = nlohmann::json::array();
  for (const auto& a : s.allreduce)
    algos.push_back({{"name", a.name}, {"ops", a.ops}, {"bytes", a.bytes}, {"seconds", a.seconds}});
  return {{"allreduce", algos}, {"sent_bytes", s.sent_bytes}, {"received_bytes", s.received_bytes}};
}

}  // namespace

std::string LiveMetricsJson(const LiveMetrics& m) {
  const nlohmann::json phases = PhasesJson(m.compression_phases);
  const nlohmann::json recoveries = RecoveriesJson(m.recoveries);
  const TrainResult::CheckpointStats& c = m.checkpoints;
  nlohmann::json j = {{"format", "cdt-live"},
                      {"version", 1},
                      {"worker_id", m.worker_id},
                      {"rank", m.rank},
                      {"world", m.world},
                      {"generation", m.generation},
                      {"step", m.step},
                      {"end_step", m.end_step},
                      {"epoch", m.epoch},
                      {"finished", m.finished},
                      {"unix_time", m.unix_time},
                      {"wall_s", m.wall_s},
                      {"steps", m.steps},
                      {"samples", m.samples},
                      {"samples_per_s", m.samples_per_s},
                      {"loss", m.loss},
                      {"test_accuracy", m.test_accuracy},
                      {"loss_curve", CurveJson(m.loss_tail)},
                      {"eval_curve", CurveJson(m.eval_curve)},
                      {"step_time",
                       {{"forward_s", m.step_time.forward_s},
                        {"backward_s", m.step_time.backward_s},
                        {"comm_wait_s", m.step_time.comm_wait_s},
                        {"optimizer_s", m.step_time.optimizer_s}}},
                      {"gradients",
                       {{"bytes_fp32", m.bytes_fp32},
                        {"bytes_wire", m.bytes_wire},
                        {"compress", m.compress},
                        {"phases", phases},
                        {"residual_pct", m.residual_pct},
                        {"overlap_ratio", m.overlap_ratio},
                        {"bucket_comm_s", m.bucket_comm_s},
                        {"bucket_wait_s", m.bucket_wait_s}}},
                      {"checkpoints",
                       {{"written", c.written},
                        {"full", c.full},
                        {"file_bytes", c.file_bytes},
                        {"capture_s", c.capture_s},
                        {"blocked_s", c.blocked_s},
                        {"encode_s", c.encode_s},
                        {"write_s", c.write_s}}},
                      {"recoveries", recoveries},
                      {"energy", {{"meter", m.energy_meter}, {"joules", m.energy_j}}},
                      {"comm", CommJson(m.comm)}};
  if (!m.node_of_rank.empty()) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& [bytes, algo] : m.algorithm_by_size)
      sizes.push_back({{"bytes", bytes}, {"algorithm", algo}});
    j["topology"] = {{"node_of_rank", m.node_of_rank},
                     {"shares_memory", m.shares_memory},
                     {"algorithm_by_size", sizes}};
  }
  return j.dump();
}

}  // namespace cdt::train
