// Checkpoint files: asynchronous, compressed, incremental, checksummed, atomic
// (docs/checkpoint-format.md has the byte layout).
//
// A checkpoint is an opaque state (the trainer's CaptureState bytes) for a step. The writer
// persists it on a background thread: Submit returns at once (the caller has already taken the
// snapshot to memory), and at most one write is in flight — a Submit while one runs waits for it
// (CheckFreq's rule: never two snapshots' worth of memory behind the disk).
//
// Every `full_every`-th checkpoint is full; the others are incremental against the last full one:
// the state is cut into chunks, a chunk equal to the base's is not written, a changed chunk is
// stored as its XOR with the base's (byte-plane shuffled: the sign, exponent and high mantissa of
// a float that moved a little are unchanged, so those planes are mostly zeros and compress well —
// the lossless cousin of Check-N-Run's quantised deltas). Chunks are compressed with zstd or lz4;
// each record carries a CRC-32 of its decoded bytes, the header one of itself.
//
// Quantised increments (`quantize = "int8"`, lossy, after Check-N-Run, NSDI'22): the caller may
// name spans of the state that hold float32 values (parameters, optimizer moments). In an
// increment, the words of a changed chunk that lie in such a span are stored as their difference
// from the base, quantised to int8 with one float32 scale per 256 values (scale = max |difference|
// / 127, round to nearest); the other bytes of the chunk stay exact (XOR with the base). A restored
// value differs from the saved one by at most half a step, max |difference| / 254 of its block, and
// the error does not build up over increments: each is against the last full checkpoint. Blocks
// with a non-finite value, and states whose size differs from the base's, are stored exactly.
//
// Files are written to a unique temporary name, fsynced, renamed and the directory fsynced
// (common/file_io.h), readable by their owner only: a crash mid-write leaves the previous
// checkpoints as they were. Loading takes the newest checkpoint
// that decodes and verifies completely and falls back past corrupt or incomplete ones, with a
// warning naming the file and what was wrong. Retention keeps the newest `keep` full checkpoints
// and the increments on them.
//
// Framework-free: bytes and files only.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cdt/log.h"
#include "common/file_system.h"

namespace cdt::elastic {

// The largest checkpoint file a reader takes (1 TiB): a bound, not a limit a model meets.
constexpr size_t kMaxCheckpointFileBytes = size_t{1} << 40;

struct CheckpointOptions {
  std::string dir;
  std::string codec = "zstd";  // zstd | lz4 | none
  int zstd_level = 3;
  bool incremental = false;
  int full_every = 10;  // with incremental: every Nth checkpoint is full
  size_t chunk_bytes = 64 << 10;
  int keep = 2;                    // full checkpoints kept (with their increments)
  std::string quantize = "none";   // none | int8: increments quantise the float spans (above)
  Log log;                         // CheckpointWriter: a write that failed with no one to tell
  const FileSystem* fs = nullptr;  // null: the process's files (common/file_system.h)
};

// float32 values at [offset, offset + 4 * count) of a state.
struct FloatSpan {
  uint64_t offset = 0;
  uint64_t count = 0;
};

// What one write did.
struct CheckpointRecord {
  int64_t step = -1;
  std::string path;
  bool full = true;
  size_t state_bytes = 0;  // the state's size
  size_t file_bytes = 0;   // what reached the disk
  size_t chunks = 0, chunks_unchanged = 0;
  size_t floats_quantised = 0;       // float32 values stored as int8 differences (lossy)
  double max_abs_error = 0;          // the largest |restored - saved| among them
  double encode_s = 0, write_s = 0;  // on the background thread
};

class CheckpointWriter {
 public:
  // Throws cdt::Error(kInvalidArgument) for a bad codec or options, (kIo) when the directory
  // cannot be created.
  explicit CheckpointWriter(CheckpointOptions options);
  ~CheckpointWriter();  // finishes the write in flight (errors are logged, not thrown)
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Queues `state` of `step` for writing and returns; waits first for a write still in flight
  // (the seconds waited are added to blocked_seconds()). Rethrows the previous write's error.
  // `floats`: spans of float32 values an increment may quantise (with quantize = "int8"); they
  // must be in order, not overlap and lie inside the state (throws kInvalidArgument otherwise).
  void Submit(int64_t step, std::string state, std::vector<FloatSpan> floats = {});
  // Waits until nothing is in flight; rethrows a write's error (cdt::Error kIo).
  void Flush();

  std::vector<CheckpointRecord> records() const;  // every completed write, in order
  double blocked_seconds() const;

 private:
  void Run();
  CheckpointRecord Write(int64_t step, const std::string& state,
                         const std::vector<FloatSpan>& floats);

  CheckpointOptions options_;
  // The names of options_, parsed once in the constructor.
  uint8_t codec_ = 0;  // a Codec (checkpoint_store.cc)
  bool quantize_int8_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false, stop_ = false;
  int64_t next_step_ = -1;
  std::string next_state_;
  std::vector<FloatSpan> next_floats_;
  std::exception_ptr error_;
  std::vector<CheckpointRecord> records_;
  double blocked_s_ = 0;
  // Background thread only: the last full checkpoint (the base of increments) and the count.
  int64_t base_step_ = -1;
  std::string base_state_;
  int64_t written_ = 0;
  std::thread thread_;
};

struct LoadedCheckpoint {
  int64_t step = -1;
  std::string state;
  std::string path;
  std::vector<std::string> warnings;  // checkpoints skipped, and why
};

// The newest checkpoint in `dir` that verifies; nullopt when there is none (warnings about the
// skipped ones are then in `skipped`, when given).
std::optional<LoadedCheckpoint> LoadNewestCheckpoint(const std::string& dir,
                                                     std::vector<std::string>* skipped = nullptr,
                                                     const FileSystem& fs = LocalFileSystem());

// Decodes one file (and its base, for an increment). Throws cdt::Error(kProtocol) saying what is
// wrong: bad magic, version, checksum, truncation, a size the file cannot hold, a missing base, a
// base that is not a full checkpoint or is the file itself.
LoadedCheckpoint ReadCheckpointFile(const std::string& path,
                                    const FileSystem& fs = LocalFileSystem());

// The CRC-32 (zlib's) of a whole state: what a checkpoint's header records of the state it
// decodes to (docs/checkpoint-format.md), so two files of one state agree on it.
uint32_t StateCrc(const std::string& state);

// Young/Daly: the checkpoint interval that minimises expected lost work plus checkpoint cost,
// sqrt(2 * cost * mtbf), in the units given.
double YoungDalyInterval(double checkpoint_cost, double mtbf);

}  // namespace cdt::elastic
