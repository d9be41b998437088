// JSON pieces the result document (result_json.cc) and the live one (live_metrics.cc) share, so
// that a recovery, a compression phase or a curve reads the same in both (docs/training.md,
// docs/dashboard.md). Included by those two files only: it brings nlohmann-json.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/train_result.h"

namespace cdt::train {

nlohmann::json CurveJson(const std::vector<std::pair<int64_t, double>>& curve);  // [[step, v]]
nlohmann::json PhasesJson(const std::vector<TrainResult::CompressionPhase>& phases);
nlohmann::json RecoveriesJson(const std::vector<TrainResult::Recovery>& recoveries);

}  // namespace cdt::train
