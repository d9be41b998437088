// Small text helpers the green readers share.
#pragma once

#include <cctype>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace cdt::green {

inline std::string AsciiLower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The whole file, byte for byte; nullopt when it cannot be opened.
inline std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace cdt::green
