// Power figures of CPUs and accelerators (knowledge_base/hardware_profiles/devices.json), for the
// model energy meter when no hardware counter can be read (CodeCarbon's TDP-table fallback), and
// their peak compute for the simulator's scaling of a model profile to another device.
#pragma once

#include <string>
#include <vector>

#include "common/file_system.h"

namespace cdt::green {

struct HardwareProfile {
  std::string name;                // "Intel Xeon (generic)", "NVIDIA A100 SXM", ...
  std::string kind;                // cpu | gpu | npu
  std::vector<std::string> match;  // substrings of the model name that select it
  double tdp_w = 0;                // design power (per package / per device)
  double idle_w = 0;               // at rest
  int threads = 0;                 // cpu: hardware threads per package (to scale a VM's share)
  std::string source;              // where the figures come from
  // Compute figures for the simulator (src/sim; 0 = not given): dense peak TFLOPS in fp32 and in
  // the 16-bit type the device trains in (fp16/bf16 tensor cores, Ascend's cube unit), and the
  // memory bandwidth.
  double peak_tflops_fp32 = 0, peak_tflops_16 = 0, memory_GBps = 0;
};

std::vector<HardwareProfile> LoadHardwareProfiles(const std::string& path,
                                                  const FileSystem& fs = LocalFileSystem());
// The first profile of `kind` whose match strings occur in `model` (case-insensitive), else the
// one named "default <kind>"; throws when neither exists.
const HardwareProfile& FindProfile(const std::vector<HardwareProfile>& profiles,
                                   const std::string& kind, const std::string& model);

}  // namespace cdt::green
