// Power figures of CPUs and accelerators (knowledge_base/hardware_profiles/devices.json), for the
// model energy meter when no hardware counter can be read (CodeCarbon's TDP-table fallback).
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
};

std::vector<HardwareProfile> LoadHardwareProfiles(const std::string& path,
                                                  const FileSystem& fs = LocalFileSystem());
// The first profile of `kind` whose match strings occur in `model` (case-insensitive), else the
// one named "default <kind>"; throws when neither exists.
const HardwareProfile& FindProfile(const std::vector<HardwareProfile>& profiles,
                                   const std::string& kind, const std::string& model);

}  // namespace cdt::green
