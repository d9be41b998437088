#include "elastic/state_file.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "cdt/error.h"
#include "common/bytes.h"

namespace cdt::elastic {

namespace {

constexpr char kMagic[8] = {'C', 'D', 'T', 'S', 'T', 'A', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8 + 4 + 4;

uint32_t Crc(std::string_view data) {
  uint32_t crc = 0;
  for (size_t done = 0; done < data.size();) {
    const auto piece = static_cast<uInt>(std::min<size_t>(data.size() - done, 1u << 30));
    crc = static_cast<uint32_t>(
        crc32(crc, reinterpret_cast<const Bytef*>(data.data()) + done, piece));
    done += piece;
  }
  return crc;
}

}  // namespace

std::string SealStateFile(int64_t step, std::string_view payload) {
  std::string out;
  ByteWriter w(&out);
  w.Raw(kMagic, sizeof kMagic);
  w.U32(kVersion);
  w.I64(step);
  w.U64(payload.size());
  w.U32(Crc(payload));
  w.U32(Crc(out));
  out.append(payload.data(), payload.size());
  return out;
}

std::string OpenStateFile(std::string_view bytes, int64_t expected_step, const std::string& path) {
  auto refuse = [&](const std::string& why) {
    throw Error(ErrorCode::kProtocol, "state file '" + path + "': " + why);
  };
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    refuse("not a state file of this version (bad magic or too short)");
  ByteReader r(bytes.substr(sizeof kMagic, kHeaderBytes - sizeof kMagic), "state file header");
  const uint32_t version = r.U32();
  const int64_t step = r.I64();
  const uint64_t size = r.U64();
  const uint32_t payload_crc = r.U32();
  const uint32_t header_crc = r.U32();
  if (Crc(bytes.substr(0, kHeaderBytes - 4)) != header_crc) refuse("header checksum mismatch");
  if (version != kVersion)
    refuse("version " + std::to_string(version) + ", this build reads " + std::to_string(kVersion));
  if (size != bytes.size() - kHeaderBytes)
    refuse("holds " + std::to_string(bytes.size() - kHeaderBytes) + " bytes, its header says " +
           std::to_string(size) + " (truncated or padded)");
  const std::string_view payload = bytes.substr(kHeaderBytes);
  if (Crc(payload) != payload_crc) refuse("checksum mismatch (the file is damaged)");
  if (step != expected_step)
    refuse("belongs to step " + std::to_string(step) + ", the checkpoint resumed is of step " +
           std::to_string(expected_step));
  return std::string(payload);
}

}  // namespace cdt::elastic
