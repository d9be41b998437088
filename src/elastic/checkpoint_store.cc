#include "elastic/checkpoint_store.h"

#include <fcntl.h>
#include <lz4.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "cdt/error.h"
#include "common/file_io.h"
#include "common/thread_name.h"

namespace cdt::elastic {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kMagic[8] = {'C', 'D', 'T', 'C', 'K', 'P', 'T', '1'};
constexpr char kEnd[8] = {'C', 'D', 'T', 'C', 'E', 'N', 'D', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 56, kRecordHeaderBytes = 24;
enum Codec : uint8_t { kNone = 0, kZstd = 1, kLz4 = 2 };
enum Encoding : uint8_t { kSameAsBase = 0, kLiteral = 1, kXorWithBase = 2, kQuantisedDelta = 3 };
constexpr size_t kQuantBlock = 256;  // float32 values per int8 scale
// Limits a reader holds a file to (a writer never comes near them): an increment's base is a full
// checkpoint, so chains are two files long.
constexpr uint32_t kMaxChunkBytes = 256u << 20;
constexpr size_t kMaxChainDepth = 2;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

uint32_t Crc(const void* data, size_t n, uint32_t crc = 0) {
  // zlib's crc32 takes uInt lengths: feed large buffers in pieces.
  const auto* p = static_cast<const Bytef*>(data);
  for (size_t done = 0; done < n;) {
    const auto piece = static_cast<uInt>(std::min<size_t>(n - done, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, p + done, piece));
    done += piece;
  }
  return crc;
}

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);  // little-endian hosts (x86, arm64)
}

template <typename T>
T Take(const std::string& in, size_t* at, const std::string& what) {
  if (*at + sizeof(T) > in.size()) throw Error(ErrorCode::kProtocol, what + ": truncated");
  T v;
  std::memcpy(&v, in.data() + *at, sizeof v);
  *at += sizeof v;
  return v;
}

Codec ParseCodec(const std::string& name) {
  if (name == "zstd") return kZstd;
  if (name == "lz4") return kLz4;
  if (name == "none") return kNone;
  throw Error(ErrorCode::kInvalidArgument,
              "checkpoint codec '" + name + "': use zstd, lz4 or none");
}

// Byte planes of 4-byte words (Blosc's shuffle): the k-th bytes of all words together; a tail
// shorter than a word stays as it is.
std::string Shuffle(const char* data, size_t n) {
  std::string out(n, '\0');
  const size_t words = n / 4;
  for (size_t w = 0; w < words; ++w)
    for (size_t b = 0; b < 4; ++b) out[b * words + w] = data[4 * w + b];
  std::memcpy(out.data() + 4 * words, data + 4 * words, n - 4 * words);
  return out;
}

std::string Unshuffle(const std::string& in) {
  const size_t n = in.size(), words = n / 4;
  std::string out(n, '\0');
  for (size_t w = 0; w < words; ++w)
    for (size_t b = 0; b < 4; ++b) out[4 * w + b] = in[b * words + w];
  std::memcpy(out.data() + 4 * words, in.data() + 4 * words, n - 4 * words);
  return out;
}

std::string Compress(Codec codec, int level, const std::string& raw) {
  if (codec == kNone) return raw;
  std::string out;
  if (codec == kZstd) {
    out.resize(ZSTD_compressBound(raw.size()));
    const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), level);
    if (ZSTD_isError(n)) throw Error(ErrorCode::kIo, std::string("zstd: ") + ZSTD_getErrorName(n));
    out.resize(n);
  } else {
    out.resize(static_cast<size_t>(LZ4_compressBound(static_cast<int>(raw.size()))));
    const int n = LZ4_compress_default(raw.data(), out.data(), static_cast<int>(raw.size()),
                                       static_cast<int>(out.size()));
    if (n <= 0) throw Error(ErrorCode::kIo, "lz4: compression failed");
    out.resize(static_cast<size_t>(n));
  }
  return out;
}

std::string Decompress(Codec codec, const char* data, size_t n, size_t raw_len,
                       const std::string& what) {
  if (codec == kNone) {
    if (n != raw_len) throw Error(ErrorCode::kProtocol, what + ": stored length mismatch");
    return std::string(data, n);
  }
  std::string out(raw_len, '\0');
  if (codec == kZstd) {
    const size_t got = ZSTD_decompress(out.data(), raw_len, data, n);
    if (ZSTD_isError(got) || got != raw_len)
      throw Error(ErrorCode::kProtocol, what + ": zstd data is corrupt");
  } else {
    const int got =
        LZ4_decompress_safe(data, out.data(), static_cast<int>(n), static_cast<int>(raw_len));
    if (got < 0 || static_cast<size_t>(got) != raw_len)
      throw Error(ErrorCode::kProtocol, what + ": lz4 data is corrupt");
  }
  return out;
}

std::string Xor(const char* a, const char* b, size_t n) {
  std::string x(a, n);
  for (size_t k = 0; k < n; ++k) x[k] = static_cast<char>(x[k] ^ b[k]);
  return x;
}

float LoadFloat(const char* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// The writer computes what the reader will restore with this very function, so that the chunk's
// checksum holds (one function: no chance of the two being compiled with different contractions).
[[gnu::noinline]] float Dequantise(float base, int8_t code, float scale) {
  return base + static_cast<float>(code) * scale;
}

// One quantised chunk (kQuantisedDelta). Layout before compression: u32 span count; per span u32
// byte offset in the chunk and u32 float count; the byte-shuffled XOR of the chunk with the base
// after every span was set to the base's bytes (zeros there); then per span its blocks' float32
// scales and its int8 codes. Stored as u32 raw length + the compressed bytes.
struct QuantisedChunk {
  std::string payload;
  std::string restored;  // what a reader rebuilds
  size_t floats = 0;
  double max_abs_error = 0;
};

// Null when a value is not finite (the caller stores the chunk exactly).
std::optional<QuantisedChunk> QuantiseChunk(const char* data, const char* base, size_t len,
                                            const std::vector<std::pair<size_t, size_t>>& spans,
                                            Codec codec, int level) {
  QuantisedChunk q;
  q.restored.assign(data, len);
  std::string raw, scales, codes;
  Put<uint32_t>(raw, static_cast<uint32_t>(spans.size()));
  for (const auto& [offset, count] : spans) {
    Put<uint32_t>(raw, static_cast<uint32_t>(offset));
    Put<uint32_t>(raw, static_cast<uint32_t>(count));
    for (size_t block = 0; block < count; block += kQuantBlock) {
      const size_t n = std::min(kQuantBlock, count - block);
      float diff[kQuantBlock];
      float largest = 0;
      for (size_t i = 0; i < n; ++i) {
        const size_t at = offset + 4 * (block + i);
        diff[i] = LoadFloat(data + at) - LoadFloat(base + at);
        if (!std::isfinite(diff[i])) return std::nullopt;
        largest = std::max(largest, std::fabs(diff[i]));
      }
      const float scale = largest / 127.0f;
      Put<float>(scales, scale);
      for (size_t i = 0; i < n; ++i) {
        const size_t at = offset + 4 * (block + i);
        const auto code = static_cast<int8_t>(
            scale > 0 ? std::clamp(std::lrint(diff[i] / scale), -127L, 127L) : 0L);
        codes.push_back(static_cast<char>(code));
        const float restored = Dequantise(LoadFloat(base + at), code, scale);
        if (!std::isfinite(restored)) return std::nullopt;
        q.max_abs_error =
            std::max(q.max_abs_error, std::fabs(double(restored) - double(LoadFloat(data + at))));
        std::memcpy(q.restored.data() + at, &restored, 4);
      }
    }
    q.floats += count;
  }
  std::string exact(data, len);
  for (const auto& [offset, count] : spans)
    std::memcpy(exact.data() + offset, base + offset, 4 * count);
  raw += Shuffle(Xor(exact.data(), base, len).data(), len);
  raw += scales;
  raw += codes;
  Put<uint32_t>(q.payload, static_cast<uint32_t>(raw.size()));
  q.payload += Compress(codec, level, raw);
  return q;
}

std::string RestoreQuantisedChunk(const std::string& payload, const char* base, size_t len,
                                  Codec codec, const std::string& who) {
  size_t at = 0;
  const auto raw_len = Take<uint32_t>(payload, &at, who);
  // Spans, the chunk's bytes, a scale per block and a code per float: never more than this.
  if (raw_len > 4 + 3 * len + 8 * (len / 4 + 1))
    throw Error(ErrorCode::kProtocol, who + ": quantised record claims " + std::to_string(raw_len) +
                                          " bytes for a chunk of " + std::to_string(len));
  const std::string raw = Decompress(codec, payload.data() + at, payload.size() - at, raw_len, who);
  at = 0;
  const auto nspans = Take<uint32_t>(raw, &at, who);
  std::vector<std::pair<size_t, size_t>> spans;
  size_t blocks = 0, floats = 0;
  for (uint32_t k = 0; k < nspans; ++k) {
    const size_t offset = Take<uint32_t>(raw, &at, who), count = Take<uint32_t>(raw, &at, who);
    if (offset % 4 != 0 || offset + 4 * count > len ||
        (!spans.empty() && offset < spans.back().first + 4 * spans.back().second))
      throw Error(ErrorCode::kProtocol, who + ": bad float span");
    spans.push_back({offset, count});
    blocks += (count + kQuantBlock - 1) / kQuantBlock;
    floats += count;
  }
  if (at + len + 4 * blocks + floats != raw.size())
    throw Error(ErrorCode::kProtocol, who + ": bad quantised record");
  std::string data = Unshuffle(raw.substr(at, len));
  for (size_t k = 0; k < len; ++k) data[k] = static_cast<char>(data[k] ^ base[k]);
  const char* scales = raw.data() + at + len;
  const char* codes = scales + 4 * blocks;
  size_t block = 0;
  float scale = 0;
  for (const auto& [offset, count] : spans)
    for (size_t i = 0; i < count; ++i) {
      if (i % kQuantBlock == 0) scale = LoadFloat(scales + 4 * block++);
      const float restored =
          Dequantise(LoadFloat(base + offset + 4 * i), static_cast<int8_t>(*codes++), scale);
      std::memcpy(data.data() + offset + 4 * i, &restored, 4);
    }
  return data;
}

std::string FileName(int64_t step, int64_t base) {
  char name[96];
  if (base < 0)
    std::snprintf(name, sizeof name, "ckpt-%012lld.full.cdtc", static_cast<long long>(step));
  else
    std::snprintf(name, sizeof name, "ckpt-%012lld.incr-%012lld.cdtc", static_cast<long long>(step),
                  static_cast<long long>(base));
  return name;
}

// (step, base step or -1) from a checkpoint file name; nullopt for other files.
std::optional<std::pair<int64_t, int64_t>> ParseName(const std::string& name) {
  long long step = 0, base = 0;
  char tail[16] = {0};
  if (std::sscanf(name.c_str(), "ckpt-%12lld.full.cdt%c", &step, tail) == 2 && name.size() == 27)
    return std::make_pair(static_cast<int64_t>(step), int64_t{-1});
  if (std::sscanf(name.c_str(), "ckpt-%12lld.incr-%12lld.cdt%c", &step, &base, tail) == 3 &&
      name.size() == 40)
    return std::make_pair(static_cast<int64_t>(step), static_cast<int64_t>(base));
  return std::nullopt;
}

}  // namespace

uint32_t StateCrc(const std::string& state) { return Crc(state.data(), state.size()); }

double YoungDalyInterval(double checkpoint_cost, double mtbf) {
  return std::sqrt(2 * std::max(0.0, checkpoint_cost) * std::max(0.0, mtbf));
}

CheckpointWriter::CheckpointWriter(CheckpointOptions o)
    : options_(std::move(o)), codec_(ParseCodec(options_.codec)) {
  if (options_.dir.empty())
    throw Error(ErrorCode::kInvalidArgument, "checkpoint directory not set");
  if (options_.chunk_bytes < 64 || options_.chunk_bytes % 4 != 0 || options_.full_every < 1 ||
      options_.keep < 1)
    throw Error(
        ErrorCode::kInvalidArgument,
        "checkpoint options: chunk >= 64 bytes and a multiple of 4, full_every and keep >= 1");
  if (options_.quantize != "none" && options_.quantize != "int8")
    throw Error(ErrorCode::kInvalidArgument,
                "checkpoint quantisation '" + options_.quantize + "': use none or int8");
  quantize_int8_ = options_.quantize == "int8";
  const FileSystem& files = Or(options_.fs);
  files.CreateDirectories(options_.dir);
  if (&files == &LocalFileSystem())  // a crash's leftovers on this disk, never a live writer's
    RemoveStaleTemporaries(options_.dir, "ckpt-");
  thread_ = std::thread([this] { Run(); });
}

CheckpointWriter::~CheckpointWriter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      options_.log.Error("cann-dist-train: checkpoint write failed: {}", e.what());
    }
  }
}

void CheckpointWriter::Submit(int64_t step, std::string state, std::vector<FloatSpan> floats) {
  uint64_t end = 0;
  for (const FloatSpan& f : floats) {
    if (f.offset < end || f.offset % 4 != 0 || f.offset + 4 * f.count > state.size())
      throw Error(ErrorCode::kInvalidArgument,
                  "checkpoint of step " + std::to_string(step) + ": float span at byte " +
                      std::to_string(f.offset) +
                      " is unaligned, out of order or past the state's " +
                      std::to_string(state.size()) + " bytes");
    end = f.offset + 4 * f.count;
  }
  std::unique_lock<std::mutex> lock(mu_);
  const auto t = Clock::now();
  cv_.wait(lock, [&] { return !busy_; });
  blocked_s_ += Since(t);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  next_step_ = step;
  next_state_ = std::move(state);
  next_floats_ = std::move(floats);
  busy_ = true;
  cv_.notify_all();
}

void CheckpointWriter::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

std::vector<CheckpointRecord> CheckpointWriter::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}

double CheckpointWriter::blocked_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocked_s_;
}

void CheckpointWriter::Run() {
  NameThisThread("cdt-checkpoint");
  for (;;) {
    int64_t step;
    std::string state;
    std::vector<FloatSpan> floats;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return busy_ || stop_; });
      if (!busy_) return;
      step = next_step_;
      state = std::move(next_state_);
      floats = std::move(next_floats_);
    }
    CheckpointRecord rec;
    std::exception_ptr error;
    try {
      rec = Write(step, state, floats);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (error)
      error_ = error;
    else
      records_.push_back(rec);
    busy_ = false;
    cv_.notify_all();
  }
}

CheckpointRecord CheckpointWriter::Write(int64_t step, const std::string& state,
                                         const std::vector<FloatSpan>& floats) {
  const auto t0 = Clock::now();
  const Codec codec = static_cast<Codec>(codec_);
  const bool full = !options_.incremental || base_step_ < 0 || written_ % options_.full_every == 0;
  const bool quantise = !full && quantize_int8_ && base_state_.size() == state.size();
  const size_t chunk = options_.chunk_bytes;
  const size_t chunks = (state.size() + chunk - 1) / chunk;
  CheckpointRecord rec;
  rec.step = step;
  rec.full = full;
  rec.state_bytes = state.size();
  rec.chunks = chunks;

  // The records first: the header carries the checksum of the state a reader restores, which a
  // quantised record makes differ from `state`.
  std::string body;
  uint32_t state_crc = 0;
  for (size_t i = 0; i < chunks; ++i) {
    const size_t begin = i * chunk, len = std::min(chunk, state.size() - begin);
    const char* data = state.data() + begin;
    const char* restored = data;
    uint8_t encoding = kLiteral;
    std::string payload;
    std::optional<QuantisedChunk> q;
    const bool has_base = !full && begin + len <= base_state_.size();
    if (has_base && std::memcmp(data, base_state_.data() + begin, len) == 0) {
      encoding = kSameAsBase;
      ++rec.chunks_unchanged;
    } else if (has_base) {
      std::vector<std::pair<size_t, size_t>> spans;  // (byte offset in the chunk, floats)
      for (size_t k = 0; quantise && k < floats.size(); ++k) {
        const FloatSpan& f = floats[k];
        const size_t from = std::max<size_t>(f.offset, begin),
                     to = std::min<size_t>(f.offset + 4 * f.count, begin + len);
        if (to > from) spans.push_back({from - begin, (to - from) / 4});
      }
      if (!spans.empty())
        q = QuantiseChunk(data, base_state_.data() + begin, len, spans, codec, options_.zstd_level);
      if (q) {
        encoding = kQuantisedDelta;
        payload = std::move(q->payload);
        restored = q->restored.data();
        rec.floats_quantised += q->floats;
        rec.max_abs_error = std::max(rec.max_abs_error, q->max_abs_error);
      } else {
        encoding = kXorWithBase;
        payload = Compress(codec, options_.zstd_level,
                           Shuffle(Xor(data, base_state_.data() + begin, len).data(), len));
      }
    } else {
      payload = Compress(codec, options_.zstd_level, Shuffle(data, len));
    }
    std::string head;
    Put<uint32_t>(head, static_cast<uint32_t>(i));
    Put<uint8_t>(head, encoding);
    head.append(3, '\0');
    Put<uint32_t>(head, static_cast<uint32_t>(len));
    Put<uint32_t>(head, static_cast<uint32_t>(payload.size()));
    Put<uint32_t>(head, Crc(restored, len));
    Put<uint32_t>(head, Crc(payload.data(), payload.size(), Crc(head.data(), head.size())));
    body += head;
    body += payload;
    state_crc = Crc(restored, len, state_crc);
  }

  std::string out;
  out.append(kMagic, sizeof kMagic);
  Put<uint32_t>(out, kVersion);
  Put<uint8_t>(out, full ? 0 : 1);
  Put<uint8_t>(out, codec);
  Put<uint16_t>(out, 0);
  Put<int64_t>(out, step);
  Put<int64_t>(out, full ? -1 : base_step_);
  Put<uint64_t>(out, state.size());
  Put<uint32_t>(out, static_cast<uint32_t>(chunk));
  Put<uint32_t>(out, static_cast<uint32_t>(chunks));
  Put<uint32_t>(out, state_crc);
  Put<uint32_t>(out, Crc(out.data(), out.size()));
  out += body;
  out.append(kEnd, sizeof kEnd);
  Put<uint32_t>(out, static_cast<uint32_t>(chunks));
  rec.encode_s = Since(t0);

  const auto t1 = Clock::now();
  rec.path = (fs::path(options_.dir) / FileName(step, full ? -1 : base_step_)).string();
  const FileSystem& files = Or(options_.fs);
  files.WriteAtomically(rec.path, out, 0600);  // a model's state: its owner's to read
  rec.write_s = Since(t1);
  rec.file_bytes = out.size();
  ++written_;
  if (full) {
    base_step_ = step;
    base_state_ = state;
    // Retention: the newest `keep` full checkpoints and the increments on them.
    std::vector<std::pair<int64_t, std::string>> fulls, incrs;
    for (const std::string& name : files.List(options_.dir)) {
      const auto parsed = ParseName(name);
      if (!parsed) continue;
      (parsed->second < 0 ? fulls : incrs)
          .push_back({parsed->second < 0 ? parsed->first : parsed->second,
                      (fs::path(options_.dir) / name).string()});
    }
    std::sort(fulls.rbegin(), fulls.rend());
    if (static_cast<int>(fulls.size()) > options_.keep) {
      const int64_t oldest_kept = fulls[static_cast<size_t>(options_.keep) - 1].first;
      for (const auto& [s, p] : fulls)
        if (s < oldest_kept) files.Remove(p);
      for (const auto& [base, p] : incrs)
        if (base < oldest_kept) files.Remove(p);
    }
  }
  return rec;
}

namespace {

// One file, and its base for an increment. `chain` holds the files already being read above this
// one: an increment's base must be a full checkpoint, so a chain is two files long, and any loop
// or longer chain is a damaged or planted file.
LoadedCheckpoint ReadCheckpointChain(const std::string& path, std::vector<std::string>* chain,
                                     const FileSystem& files) {
  const std::string who = "checkpoint '" + path + "'";
  if (std::find(chain->begin(), chain->end(), path) != chain->end())
    throw Error(ErrorCode::kProtocol, who + ": is its own base (a loop in the chain of bases)");
  if (chain->size() >= kMaxChainDepth)
    throw Error(ErrorCode::kProtocol, who + ": the chain of bases is longer than " +
                                          std::to_string(kMaxChainDepth) + " files");
  chain->push_back(path);
  std::optional<std::string> read = files.ReadIfExists(path, kMaxCheckpointFileBytes);
  if (!read) throw Error(ErrorCode::kIo, who + ": gone (removed while being read)");
  const std::string in = std::move(*read);
  size_t at = 0;
  if (in.size() < kHeaderBytes || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    throw Error(ErrorCode::kProtocol, who + ": not a checkpoint (bad magic or too short)");
  at = sizeof kMagic;
  const auto version = Take<uint32_t>(in, &at, who);
  if (version != kVersion)
    throw Error(ErrorCode::kProtocol, who + ": format version " + std::to_string(version) +
                                          ", this build reads " + std::to_string(kVersion));
  const auto kind = Take<uint8_t>(in, &at, who);
  const auto codec = static_cast<Codec>(Take<uint8_t>(in, &at, who));
  Take<uint16_t>(in, &at, who);
  const auto step = Take<int64_t>(in, &at, who);
  const auto base_step = Take<int64_t>(in, &at, who);
  const auto state_bytes = Take<uint64_t>(in, &at, who);
  const auto chunk = Take<uint32_t>(in, &at, who);
  const auto chunks = Take<uint32_t>(in, &at, who);
  const auto state_crc = Take<uint32_t>(in, &at, who);
  const uint32_t header_crc = Crc(in.data(), at);
  if (Take<uint32_t>(in, &at, who) != header_crc)
    throw Error(ErrorCode::kProtocol, who + ": header checksum mismatch");
  // Every size is checked against the file before anything is allocated: each chunk has a record
  // header in the file, and no chunk is larger than kMaxChunkBytes.
  if (codec > kLz4 || kind > 1 || chunk == 0 || chunk > kMaxChunkBytes ||
      static_cast<uint64_t>(chunks) != (state_bytes + chunk - 1) / chunk ||
      static_cast<uint64_t>(chunks) > (in.size() - kHeaderBytes) / kRecordHeaderBytes)
    throw Error(ErrorCode::kProtocol,
                who + ": inconsistent header (" + std::to_string(state_bytes) + " bytes in " +
                    std::to_string(chunks) + " chunks of " + std::to_string(chunk) +
                    ", in a file of " + std::to_string(in.size()) + ")");
  if (const auto named = ParseName(fs::path(path).filename().string());
      named && (named->first != step || named->second != (kind == 1 ? base_step : -1)))
    throw Error(ErrorCode::kProtocol,
                who + ": its header says step " + std::to_string(step) +
                    (kind == 1 ? " on base " + std::to_string(base_step) : "") +
                    ", its name something else");
  LoadedCheckpoint base;
  if (kind == 1) {
    const std::string base_path = (fs::path(path).parent_path() / FileName(base_step, -1)).string();
    if (!files.Exists(base_path))
      throw Error(ErrorCode::kProtocol, who + ": its base, full checkpoint of step " +
                                            std::to_string(base_step) + ", is missing");
    try {
      base = ReadCheckpointChain(base_path, chain, files);
    } catch (const Error& e) {
      throw Error(ErrorCode::kProtocol, who + ": its base cannot be used: " + e.what());
    }
  }
  LoadedCheckpoint out;
  out.step = step;
  out.path = path;
  out.state.reserve(std::min<uint64_t>(state_bytes, in.size() + base.state.size()));
  for (uint32_t i = 0; i < chunks; ++i) {
    const std::string rwho = who + " record " + std::to_string(i);
    const size_t head_at = at;
    const auto index = Take<uint32_t>(in, &at, rwho);
    const auto encoding = Take<uint8_t>(in, &at, rwho);
    at += 3;
    const auto len = Take<uint32_t>(in, &at, rwho);
    const auto payload_len = Take<uint32_t>(in, &at, rwho);
    const auto chunk_crc = Take<uint32_t>(in, &at, rwho);
    const uint32_t expect = Crc(in.data() + head_at, kRecordHeaderBytes - 4);
    const auto record_crc = Take<uint32_t>(in, &at, rwho);
    if (at + payload_len > in.size()) throw Error(ErrorCode::kProtocol, rwho + ": truncated");
    if (Crc(in.data() + at, payload_len, expect) != record_crc || index != i)
      throw Error(ErrorCode::kProtocol, rwho + ": checksum mismatch (the file is corrupt)");
    const size_t begin = static_cast<size_t>(i) * chunk;
    if (len > chunk || begin + len > state_bytes)
      throw Error(ErrorCode::kProtocol,
                  rwho + ": " + std::to_string(len) + " bytes do not fit the header's chunks");
    std::string data;
    if (encoding == kSameAsBase || encoding == kXorWithBase || encoding == kQuantisedDelta) {
      if (kind != 1 || begin + len > base.state.size())
        throw Error(ErrorCode::kProtocol, rwho + ": refers to a base it does not have");
      if (encoding == kSameAsBase) {
        data = base.state.substr(begin, len);
      } else if (encoding == kQuantisedDelta) {
        data = RestoreQuantisedChunk(in.substr(at, payload_len), base.state.data() + begin, len,
                                     codec, rwho);
      } else {
        data = Unshuffle(Decompress(codec, in.data() + at, payload_len, len, rwho));
        for (size_t k = 0; k < len; ++k)
          data[k] = static_cast<char>(data[k] ^ base.state[begin + k]);
      }
    } else if (encoding == kLiteral) {
      data = Unshuffle(Decompress(codec, in.data() + at, payload_len, len, rwho));
    } else {
      throw Error(ErrorCode::kProtocol, rwho + ": unknown encoding " + std::to_string(encoding));
    }
    if (Crc(data.data(), data.size()) != chunk_crc)
      throw Error(ErrorCode::kProtocol, rwho + ": decoded bytes fail their checksum");
    out.state += data;
    at += payload_len;
  }
  if (at + sizeof kEnd + 4 > in.size() || std::memcmp(in.data() + at, kEnd, sizeof kEnd) != 0)
    throw Error(ErrorCode::kProtocol, who + ": truncated (no end marker)");
  if (out.state.size() != state_bytes || Crc(out.state.data(), out.state.size()) != state_crc)
    throw Error(ErrorCode::kProtocol, who + ": the state fails its checksum");
  chain->pop_back();
  return out;
}

}  // namespace

LoadedCheckpoint ReadCheckpointFile(const std::string& path, const FileSystem& fs) {
  std::vector<std::string> chain;
  return ReadCheckpointChain(path, &chain, fs);
}

std::optional<LoadedCheckpoint> LoadNewestCheckpoint(const std::string& dir,
                                                     std::vector<std::string>* skipped,
                                                     const FileSystem& fs) {
  std::vector<std::pair<int64_t, std::string>> files;
  for (const std::string& name : fs.List(dir))
    if (const auto parsed = ParseName(name))
      files.push_back({parsed->first, (std::filesystem::path(dir) / name).string()});
  std::sort(files.rbegin(), files.rend());
  std::vector<std::string> warnings;
  for (const auto& [step, path] : files) {
    // Any failure on one file skips it: a damaged or planted file must cost a checkpoint, never
    // the job (an impossible size fails an allocation, not only a check).
    try {
      LoadedCheckpoint c = ReadCheckpointFile(path, fs);
      c.warnings = warnings;
      return c;
    } catch (const Error& e) {
      warnings.push_back(std::string(e.what()) + "; using an older checkpoint");
    } catch (const std::exception& e) {
      warnings.push_back("checkpoint '" + path + "': cannot be read (" + e.what() +
                         "); using an older checkpoint");
    }
  }
  if (skipped) *skipped = warnings;
  return std::nullopt;
}

}  // namespace cdt::elastic
