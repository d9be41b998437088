// Small text helpers the green readers share.
#pragma once

#include <cctype>
#include <string>

namespace cdt::green {

inline std::string AsciiLower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace cdt::green
