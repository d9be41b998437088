// Human sizes: "4K" = 4096, "64M", "1G", plain numbers are bytes. Binary multiples, as nccl-tests.
#pragma once

#include <cstddef>
#include <string>

namespace cdt {

// Throws cdt::Error(kInvalidArgument) naming `what` (the flag) on bad input.
size_t ParseBytes(const std::string& text, const std::string& what);
std::string FormatBytes(size_t bytes);  // "4K", "64M", "1000"

}  // namespace cdt
