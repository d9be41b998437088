// Shared by the libFuzzer targets (tests/fuzz/README.md): each feeds bytes an attacker or a damaged
// disk could produce to one parser. A cdt::Error is the parser refusing the input, as it must; any
// other exception, a crash or a sanitizer report is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cdt::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// Splits the input in two at its first NUL byte (the second part empty if there is none).
inline std::pair<std::string, std::string> SplitAtNul(const uint8_t* data, size_t size) {
  const std::string_view all = AsText(data, size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {std::string(all), std::string()};
  return {std::string(all.substr(0, nul)), std::string(all.substr(nul + 1))};
}

}  // namespace cdt::fuzz
