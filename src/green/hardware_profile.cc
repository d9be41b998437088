#include "green/hardware_profile.h"

#include <algorithm>
#include <cctype>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "common/checked_number.h"
#include "green/text.h"

namespace cdt::green {
std::vector<HardwareProfile> LoadHardwareProfiles(const std::string& path, const FileSystem& fs) {
  const std::string text = fs.Read(path, kMaxTextFileBytes, "hardware profiles");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, path + ": not JSON: " + e.what());
  }
  std::vector<HardwareProfile> out;
  if (!doc.contains("devices") || !doc["devices"].is_array())
    throw Error(ErrorCode::kInvalidArgument, path + ": expected {\"devices\": [...]}");
  for (size_t i = 0; i < doc["devices"].size(); ++i) {
    const nlohmann::json& d = doc["devices"][i];
    try {
      HardwareProfile p;
      p.name = d.at("name").get<std::string>();
      p.kind = d.at("kind").get<std::string>();
      p.tdp_w = d.at("tdp_w").get<double>();
      p.idle_w = d.value("idle_w", 0.1 * p.tdp_w);
      if (d.contains("threads")) {  // checked before it becomes an int (1e300 would not fit)
        const std::optional<int64_t> threads = JsonIntegerIn(d["threads"], 0, 1000000);
        if (!threads)
          throw std::invalid_argument("threads: expected an integer " + RangeText(0, 1000000));
        p.threads = static_cast<int>(*threads);
      }
      p.source = d.value("source", "");
      p.peak_tflops_fp32 = d.value("peak_tflops_fp32", 0.0);
      p.peak_tflops_16 = d.value("peak_tflops_16", 0.0);
      p.memory_GBps = d.value("memory_GBps", 0.0);
      if (p.peak_tflops_fp32 < 0 || p.peak_tflops_16 < 0 || p.memory_GBps < 0)
        throw std::invalid_argument(
            "peak_tflops_fp32, peak_tflops_16 and memory_GBps must be >= 0");
      if (d.contains("match")) p.match = d["match"].get<std::vector<std::string>>();
      if (p.tdp_w <= 0 || p.idle_w < 0 || p.idle_w > p.tdp_w)
        throw std::invalid_argument("need 0 <= idle_w <= tdp_w, tdp_w > 0");
      out.push_back(std::move(p));
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kInvalidArgument,
                  path + ": device " + std::to_string(i) + ": " + e.what());
    }
  }
  return out;
}

const HardwareProfile& FindProfile(const std::vector<HardwareProfile>& profiles,
                                   const std::string& kind, const std::string& model) {
  const std::string m = AsciiLower(model);
  for (const HardwareProfile& p : profiles) {
    if (p.kind != kind) continue;
    if (AsciiLower(p.name) == m) return p;
    for (const std::string& s : p.match)
      if (!s.empty() && m.find(AsciiLower(s)) != std::string::npos) return p;
  }
  for (const HardwareProfile& p : profiles)
    if (p.kind == kind && p.name == "default " + kind) return p;
  throw Error(ErrorCode::kInvalidArgument,
              "no hardware profile of kind " + kind + " for '" + model + "'");
}

}  // namespace cdt::green
