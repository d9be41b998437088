// The JSON document `train --json` writes (docs/training.md, docs/elastic.md).
#include "train/result_json_parts.h"

namespace cdt::train {

nlohmann::json CurveJson(const std::vector<std::pair<int64_t, double>>& curve) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [step, v] : curve) out.push_back({step, v});
  return out;
}

nlohmann::json PhasesJson(const std::vector<TrainResult::CompressionPhase>& phases) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : phases) out.push_back({p.step, p.phase, p.compressor, p.parameter});
  return out;
}

nlohmann::json RecoveriesJson(const std::vector<TrainResult::Recovery>& recoveries) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& x : recoveries)
    out.push_back({{"cause", x.cause},
                   {"lost_workers", x.lost},
                   {"detected_after_s", x.detected_after_s},
                   {"rto_s", x.rto_s},
                   {"failed_step", x.failed_step},
                   {"resumed_step", x.resumed_step},
                   {"lost_steps", x.lost_steps},
                   {"world_before", x.world_before},
                   {"world_after", x.world_after},
                   {"generation", x.generation}});
  return out;
}

std::string TrainResultJson(const TrainResult& r) {
  const nlohmann::json loss = CurveJson(r.loss_curve), evals = CurveJson(r.eval_curve);
  const nlohmann::json phases = PhasesJson(r.compression_phases);
  const nlohmann::json recoveries = RecoveriesJson(r.recoveries);
  nlohmann::json j = {
      {"world_size", r.world_size},
      {"model", r.model},
      {"params", r.params},
      {"blas", {{"name", r.blas}, {"path", r.blas_path}}},
      {"allocator", r.allocator},
      {"allreduce_selection", r.allreduce_selection},
      {"elastic", r.elastic},
      {"steps", r.steps},
      {"first_step", r.first_step},
      {"total_steps", r.total_steps},
      {"samples", r.samples},
      {"wall_s", r.wall_s},
      {"started_unix", r.started_unix},
      {"eval_s", r.eval_s},
      {"samples_per_s", r.samples_per_s},
      {"test_accuracy",
       r.test_accuracy < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.test_accuracy)},
      {"final_loss", r.final_loss},
      {"loss_curve", loss},
      {"eval_curve", evals},
      {"time_to_target_s",
       r.time_to_target_s < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.time_to_target_s)},
      {"step_time",
       {{"forward_s", r.step_time.forward_s},
        {"backward_s", r.step_time.backward_s},
        {"comm_wait_s", r.step_time.comm_wait_s},
        {"optimizer_s", r.step_time.optimizer_s}}},
      {"comm",
       {{"bytes_fp32", r.bytes_fp32},
        {"bytes_wire", r.bytes_wire},
        {"buckets", r.buckets},
        {"bucket_bytes", r.bucket_bytes},
        {"bucket_source", r.bucket_source},
        {"bucket_elements", r.bucket_elements},
        {"bucket_priority", r.bucket_priority},
        {"bucket_comm_s", r.bucket_comm_s},
        {"bucket_wait_s", r.bucket_wait_s},
        {"overlap_ratio", r.overlap_ratio}}},
      {"sync_wait_fraction", r.sync_wait_fraction},
      {"batch_splits", r.batch_splits},
      {"compression",
       {{"compressor", r.compress},
        {"values", r.compress_values},
        {"phases", phases},
        {"volume_reduction", r.bytes_fp32 > 0 ? 1 - r.bytes_wire / r.bytes_fp32 : 0.0},
        {"residual_pct", r.residual_pct},
        {"direct_reductions", r.direct_reductions}}},
      {"params_consistent", r.params_consistent},
      {"resumed_from", r.resumed_from},
      {"checkpoint", r.checkpoint},
      {"checkpoints",
       {{"written", r.checkpoints.written},
        {"full", r.checkpoints.full},
        {"file_bytes", r.checkpoints.file_bytes},
        {"state_bytes", r.checkpoints.state_bytes},
        {"last_full_bytes", r.checkpoints.last_full_bytes},
        {"last_incremental_bytes", r.checkpoints.last_incremental_bytes},
        {"capture_s", r.checkpoints.capture_s},
        {"blocked_s", r.checkpoints.blocked_s},
        {"encode_s", r.checkpoints.encode_s},
        {"write_s", r.checkpoints.write_s},
        {"floats_quantised", r.checkpoints.floats_quantised},
        {"max_abs_error", r.checkpoints.max_abs_error},
        {"health", r.checkpoints.health}}},
      {"generation", r.generation},
      {"energy",
       {{"meter", r.energy.meter},
        {"modelled", r.energy.modelled},
        {"joules", r.energy.joules},
        {"step_j", r.energy.step_j}}},
      {"recoveries", recoveries}};
  return j.dump(2);
}

}  // namespace cdt::train
