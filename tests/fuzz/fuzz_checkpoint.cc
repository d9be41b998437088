// The checkpoint reader (elastic/checkpoint_store.h) on a directory holding what the input says:
// an increment of step 2 on base 1 and that full checkpoint. Input: u32 length of the increment,
// the increment, then the base. Whatever they hold, loading finds a checkpoint or refuses with
// reasons.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "cdt/error.h"
#include "elastic/checkpoint_store.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const std::string dir = [] {
    const std::string d =
        (fs::temp_directory_path() / ("cdt-fuzz-ckpt-" + std::to_string(::getpid()))).string();
    fs::create_directories(d);
    return d;
  }();
  if (size < 4) return 0;
  uint32_t len;
  std::memcpy(&len, data, 4);
  len = static_cast<uint32_t>(len % (size - 4 + 1));
  const std::string increment(reinterpret_cast<const char*>(data + 4), len);
  const std::string base(reinterpret_cast<const char*>(data + 4 + len), size - 4 - len);
  std::ofstream(dir + "/ckpt-000000000002.incr-000000000001.cdtc", std::ios::binary) << increment;
  std::ofstream(dir + "/ckpt-000000000001.full.cdtc", std::ios::binary) << base;
  std::vector<std::string> skipped;
  auto loaded = cdt::elastic::LoadNewestCheckpoint(dir, &skipped);
  if (loaded && loaded->step != 1 && loaded->step != 2) __builtin_trap();
  return 0;
}
