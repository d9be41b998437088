// The JSON document `train --json` writes (docs/training.md, docs/elastic.md).
#include <nlohmann/json.hpp>

#include "train/train_result.h"

namespace cdt::train {

std::string TrainResultJson(const TrainResult& r) {
  nlohmann::json loss = nlohmann::json::array(), evals = nlohmann::json::array();
  for (auto& [s, l] : r.loss_curve) loss.push_back({s, l});
  for (auto& [s, a] : r.eval_curve) evals.push_back({s, a});
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& p : r.compression_phases)
    phases.push_back({p.step, p.phase, p.compressor, p.parameter});
  nlohmann::json recoveries = nlohmann::json::array();
  for (const auto& x : r.recoveries)
    recoveries.push_back({{"cause", x.cause},
                          {"lost_workers", x.lost},
                          {"detected_after_s", x.detected_after_s},
                          {"rto_s", x.rto_s},
                          {"failed_step", x.failed_step},
                          {"resumed_step", x.resumed_step},
                          {"lost_steps", x.lost_steps},
                          {"world_before", x.world_before},
                          {"world_after", x.world_after},
                          {"generation", x.generation}});
  nlohmann::json j = {
      {"world_size", r.world_size},
      {"model", r.model},
      {"params", r.params},
      {"blas", {{"name", r.blas}, {"path", r.blas_path}}},
      {"allocator", r.allocator},
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
