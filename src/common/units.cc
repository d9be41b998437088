#include "common/units.h"

#include <cctype>

#include "cdt/error.h"

namespace cdt {

size_t ParseBytes(const std::string& text, const std::string& what) {
  size_t i = 0;
  unsigned long long value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
    if (value > (1ull << 50)) break;
    ++i;
  }
  std::string suffix = text.substr(i);
  unsigned long long mult = 0;
  if (suffix.empty() || suffix == "B")
    mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB")
    mult = 1ull << 30;
  if (i == 0 || mult == 0 || value > (1ull << 40))
    throw Error(ErrorCode::kInvalidArgument,
                what + ": '" + text + "' is not a size (examples: 4096, 4K, 64M, 1G)");
  return static_cast<size_t>(value * mult);
}

std::string FormatBytes(size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return std::to_string(bytes >> 30) + "G";
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

}  // namespace cdt
