// A checksummed envelope for the small per-rank state files kept beside a checkpoint (each rank's
// compression state; docs/checkpoint-format.md, "State files"). It ties the file to the step of
// the model checkpoint it belongs to: a file from another step is refused like a damaged one.
//
//   magic "CDTSTAT1" | u32 version = 1 | i64 step | u64 payload bytes | u32 CRC-32 of the payload |
//   u32 CRC-32 of the 32 bytes before it | payload
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cdt::elastic {

std::string SealStateFile(int64_t step, std::string_view payload);

// The payload. Throws cdt::Error(kProtocol) naming `path` and what is wrong: not such a file, a
// truncation, a checksum, or a step other than `expected_step`.
std::string OpenStateFile(std::string_view bytes, int64_t expected_step, const std::string& path);

}  // namespace cdt::elastic
