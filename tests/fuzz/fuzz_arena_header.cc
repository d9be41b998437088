// The shared-memory arena's header as a member attaching to it reads it
// (comm/transport/node_arena.h, NodeArena::CheckHeader): a segment in /dev/shm is memory another
// process wrote, so any bytes, any member count, any segment size. Refused with cdt::Error or
// taken; a taken layout must fit the segment size it was checked against.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cdt/error.h"
#include "comm/transport/node_arena.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cdt::shm::NodeArena;
  if (size < 2) return 0;
  // First byte: the member count the attaching group expects; second: the mapping's size (the
  // input's, or a power of two up to 2^47: a big mapping whose header is the input). The header
  // is read from aligned memory padded with zeros, as a fresh mapping is.
  const int members = 1 + data[0] % 16;
  const size_t body = size - 2;
  const size_t segment = data[1] < 128 ? body : size_t{1} << (data[1] % 48);
  std::vector<uint64_t> aligned(std::max<size_t>(body, 4096) / 8 + 1, 0);
  std::memcpy(aligned.data(), data + 2, body);
  try {
    const size_t slot = NodeArena::CheckHeader(
        aligned.data(), std::min(segment, aligned.size() * 8), members, "/fuzz");
    const auto need = NodeArena::CheckedBytesFor(members, slot);
    if (!need || *need > segment) std::abort();  // a layout that does not fit was taken
  } catch (const cdt::Error&) {
  }
  (void)NodeArena::CheckedBytesFor(static_cast<int64_t>(data[0]) - 8, segment - 1);
  return 0;
}
