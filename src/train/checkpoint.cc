// Checkpoint files of the trainer (format: docs/training.md, docs/compression.md).
#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <string.h>  // memmem
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "cdt/error.h"
#include "common/file_io.h"
#include "elastic/state_file.h"

namespace cdt::train {

namespace {

// Where the float32 tensors that may be quantised lie in a torch archive's bytes: the archive
// stores each tensor's data verbatim (64-byte aligned), so each is found by its own bytes. Small
// tensors (under 4 KiB) are left exact; one found at a place already taken (equal contents) is
// looked for further on, a few times, and otherwise left exact too.
std::vector<elastic::FloatSpan> LocateFloats(const std::string& bytes, torch::nn::Module& model,
                                             torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> tensors = model.parameters();
  for (const auto& [key, state] : opt.state()) {
    if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state.get()))
      tensors.push_back(sgd->momentum_buffer());
    else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state.get()))
      tensors.push_back(adamw->exp_avg());
  }
  std::vector<elastic::FloatSpan> spans;
  auto taken = [&](uint64_t at, uint64_t n) {
    for (const auto& s : spans)
      if (at < s.offset + 4 * s.count && s.offset < at + n) return true;
    return false;
  };
  for (const torch::Tensor& t : tensors) {
    if (!t.defined() || t.scalar_type() != torch::kFloat32 || t.numel() < 1024 ||
        !t.is_contiguous())
      continue;
    const char* data = static_cast<const char*>(t.data_ptr());
    const size_t n = static_cast<size_t>(t.numel()) * 4;
    const char* from = bytes.data();
    for (int tries = 0; tries < 4; ++tries) {
      const void* hit =
          ::memmem(from, static_cast<size_t>(bytes.data() + bytes.size() - from), data, n);
      if (!hit) break;
      const auto at = static_cast<uint64_t>(static_cast<const char*>(hit) - bytes.data());
      if (at % 4 == 0 && !taken(at, n)) {
        spans.push_back({at, static_cast<uint64_t>(t.numel())});
        break;
      }
      from = static_cast<const char*>(hit) + 4;
    }
  }
  std::sort(spans.begin(), spans.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  return spans;
}

// A torch archive is a zip file whose entries carry CRC-32s, but libtorch's reader does not check
// them (a flipped byte in a tensor loads silently: checked with Debian's libtorch 1.13). For the
// one format of ours without a checksum of its own, the checkpoint.pt of older versions, check
// them here: every central-directory entry's stored (uncompressed) data against its CRC-32.
// Throws cdt::Error(kProtocol) naming `path`.
void VerifyZipChecksums(const std::string& zip, const std::string& path) {
  auto bad = [&](const std::string& why) {
    throw Error(ErrorCode::kProtocol, "checkpoint '" + path + "': " + why);
  };
  auto u16 = [&](size_t at) {
    if (at + 2 > zip.size()) bad("truncated zip structure");
    return static_cast<uint32_t>(static_cast<uint8_t>(zip[at])) |
           static_cast<uint32_t>(static_cast<uint8_t>(zip[at + 1])) << 8;
  };
  auto u32 = [&](size_t at) { return u16(at) | u16(at + 2) << 16; };
  // The end-of-central-directory record: within the last 64 KiB + 22 bytes.
  size_t end = std::string::npos;
  for (size_t at = zip.size() >= 22 ? zip.size() - 22 : 0;; --at) {
    if (zip.size() >= 22 && u32(at) == 0x06054b50) {
      end = at;
      break;
    }
    if (at == 0 || zip.size() - at > 65557) break;
  }
  if (end == std::string::npos) bad("not a zip archive (no end of central directory)");
  const uint32_t entries = u16(end + 10);
  size_t at = u32(end + 16);
  if (entries == 0xffff || at == 0xffffffffu)
    bad("a zip64 archive, which this check does not read");
  for (uint32_t e = 0; e < entries; ++e) {
    if (u32(at) != 0x02014b50) bad("damaged zip central directory");
    const uint32_t method = u16(at + 10), crc = u32(at + 16), size = u32(at + 20);
    const size_t local = u32(at + 42);
    if (u32(local) != 0x04034b50) bad("damaged zip entry");
    const size_t data = local + 30 + u16(local + 26) + u16(local + 28);
    if (method != 0 || data + size > zip.size() || data + size < data)
      bad("zip entry " + std::to_string(e) + " is compressed or runs past the file");
    if (static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(zip.data() + data),
                                    static_cast<uInt>(size))) != crc)
      bad("zip entry " + std::to_string(e) + " fails its CRC-32 (the file is damaged)");
    at += 46 + u16(at + 28) + u16(at + 30) + u16(at + 32);
  }
}

}  // namespace

// Everything needed to continue exactly: model, optimizer, position, RNG (format: a torch
// archive; docs/training.md). Rank 0's copy is written; every rank holds the same state.
std::string CaptureState(torch::nn::Module& model, torch::optim::Optimizer& opt, const Position& p,
                         uint64_t seed, std::vector<elastic::FloatSpan>* floats) {
  torch::serialize::OutputArchive archive, model_ar, opt_ar;
  model.save(model_ar);
  opt.save(opt_ar);
  archive.write("model", model_ar);
  archive.write("optimizer", opt_ar);
  archive.write("step", torch::tensor(p.step));
  archive.write("epoch", torch::tensor(static_cast<int64_t>(p.epoch)));
  archive.write("position", torch::tensor(static_cast<int64_t>(p.pos)));
  archive.write("seed", torch::tensor(static_cast<int64_t>(seed)));
  archive.write("global_batch", torch::tensor(p.global_batch));
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("torch_rng", gen.get_state());
  }
  std::ostringstream out;
  archive.save_to(out);
  std::string bytes = out.str();
  if (floats) *floats = LocateFloats(bytes, model, opt);
  return bytes;
}

Position RestoreState(const std::string& bytes, torch::nn::Module& model,
                      torch::optim::Optimizer& opt, uint64_t run_seed, const std::string& source) {
  torch::serialize::InputArchive archive, model_ar, opt_ar;
  std::istringstream in(bytes);
  try {
    archive.load_from(in);
    archive.read("model", model_ar);
    archive.read("optimizer", opt_ar);
    model.load(model_ar);
    opt.load(opt_ar);
    // A fresh tensor per key: reading into a defined tensor resizes its (archive-owned) storage.
    auto read_int = [&](const char* key) {
      torch::Tensor t;
      archive.read(key, t);
      return t.item<int64_t>();
    };
    Position p;
    p.step = read_int("step");
    p.epoch = static_cast<uint64_t>(read_int("epoch"));
    p.pos = static_cast<size_t>(read_int("position"));
    const int64_t seed = read_int("seed");
    {
      torch::Tensor gb;
      if (archive.try_read("global_batch", gb)) p.global_batch = gb.item<int64_t>();
    }
    if (static_cast<uint64_t>(seed) != run_seed)
      throw Error(ErrorCode::kInvalidArgument,
                  "checkpoint '" + source + "' was written with --seed " + std::to_string(seed) +
                      ", this run has --seed " + std::to_string(run_seed) +
                      " (the data order would differ)");
    torch::Tensor t;
    archive.read("torch_rng", t);
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(t);
    return p;
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::kProtocol, "checkpoint '" + source +
                                          "' cannot be loaded (does it belong to "
                                          "this model, its --linear-blocks and this optimizer?): " +
                                          e.what_without_backtrace());
  }
}

std::string CheckpointPath(const std::string& dir) { return dir + "/checkpoint.pt"; }

void WriteStateFile(const std::string& path, const std::string& bytes, const FileSystem& fs) {
  fs.WriteAtomically(path, bytes, 0600);  // a model's state: its owner's to read
}

std::string NewestCheckpoint(const std::string& dir, const Log* log, std::string* source,
                             int64_t* step, const FileSystem& fs) {
  std::vector<std::string> skipped;
  std::optional<elastic::LoadedCheckpoint> c = elastic::LoadNewestCheckpoint(dir, &skipped, fs);
  if (c) skipped = c->warnings;
  if (log)
    for (const auto& w : skipped) log->Warning("cann-dist-train train: warning: {}", w);
  *step = -1;
  if (c) {
    *source = c->path;
    *step = c->step;
    return std::move(c->state);
  }
  const std::string legacy = CheckpointPath(dir);
  std::optional<std::string> read = fs.ReadIfExists(legacy, elastic::kMaxCheckpointFileBytes);
  if (!read) return {};
  *source = legacy;
  *step = kLegacyStep;
  std::string bytes = std::move(*read);
  VerifyZipChecksums(bytes, legacy);
  return bytes;
}

void AgreeOnResumeState(Communicator& comm, int64_t step, uint32_t state_crc,
                        const std::string& source, const std::string& dir) {
  // Each rank's step, state CRC and what it found (its file, or its directory when none),
  // fixed-size.
  constexpr size_t kRecord = 512;
  constexpr size_t kHead = 2 * sizeof(int64_t);
  std::string mine(kRecord, '\0');
  const int64_t crc = state_crc;
  std::memcpy(mine.data(), &step, sizeof step);
  std::memcpy(mine.data() + sizeof step, &crc, sizeof crc);
  const std::string what = (source.empty() ? dir : source).substr(0, kRecord - kHead - 1);
  std::memcpy(mine.data() + kHead, what.data(), what.size());
  const size_t world = static_cast<size_t>(comm.size());
  std::string all(kRecord * world, '\0');
  comm.Allgatherv(mine.data(), all.data(), std::vector<size_t>(world, kRecord / 8),
                  DataType::kInt64)
      ->Wait();
  bool same_step = true, same_state = true;
  std::string each;
  for (size_t r = 0; r < world; ++r) {
    int64_t s = 0, c = 0;
    std::memcpy(&s, all.data() + r * kRecord, sizeof s);
    std::memcpy(&c, all.data() + r * kRecord + sizeof s, sizeof c);
    same_step = same_step && s == step;
    same_state = same_state && c == crc;
    // Another rank's record is not trusted to hold a terminated string.
    const char* at = all.data() + r * kRecord + kHead;
    const std::string found(at, strnlen(at, kRecord - kHead));
    char crc_text[16];
    std::snprintf(crc_text, sizeof crc_text, "%08x", static_cast<unsigned>(c));
    each += "\n  rank " + std::to_string(r) + ": " +
            (s == -1 ? "no checkpoint in '" + found + "'"
             : s == kLegacyStep
                 ? "a checkpoint.pt of an older version (state CRC " + std::string(crc_text) +
                       "), '" + found + "'"
                 : "step " + std::to_string(s) + ", state CRC " + crc_text + ", '" + found + "'");
  }
  if (!same_step || !same_state)
    throw Error(
        ErrorCode::kInvalidArgument,
        std::string("--resume: the ranks found different checkpoints") +
            (same_step ? " of the same step (different runs, or a file changed since)" : "") +
            ", and resuming from different states would make them diverge:" + each +
            "\nGive every rank the same --checkpoint-dir on a file system they all see "
            "(or copy the newest checkpoint to every node), then resume again");
}

CheckpointSchedule::CheckpointSchedule(const CheckpointOptions& o, bool writer, const Log& log)
    : o_(o), log_(log), writer_rank_(writer) {
  elastic::PredictorOptions po;
  po.memory_limit_bytes =
      static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  predictor_ = elastic::FailurePredictor(po);
}

bool CheckpointSchedule::ObserveHealth(double step_s, int64_t step, int rank) {
  // One sample a second: the mean step time since the last one.
  const double now =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  health_step_s_ += step_s;
  ++health_steps_;
  if (o_.health_interval_s <= 0 || (health_t_ >= 0 && now - health_t_ < o_.health_interval_s))
    return false;
  health_t_ = now;
  elastic::HealthSample s;
  s.t = now;
  s.step_time_s = health_step_s_ / health_steps_;
  health_step_s_ = 0;
  health_steps_ = 0;
  s.rss_bytes = elastic::ReadResidentBytes(::getpid()).value_or(0);
  s.tcp_retrans = elastic::ReadTcpRetransSegs().value_or(0);
  s.temperature_c = elastic::ReadMaxTemperatureC().value_or(-1);
  const std::optional<elastic::HealthWarning> w = predictor_.Observe(s);
  if (!w) return false;
  log_.Warning("\rhealth: rank {}, step {}: {}: {}{}", rank, step, w->rule, w->detail,
               o_.dir.empty() ? "" : "; checkpointing now");
  return true;
}

bool CheckpointSchedule::Due(int64_t step) const {
  if (requested_) return true;
  if (o_.mtbf_s > 0)
    return writer_rank_ && (!measured_ || std::chrono::steady_clock::now() >= due_at_);
  return o_.every > 0 && (step + 1) % o_.every == 0;
}

void CheckpointSchedule::Take(
    int64_t next_step,
    const std::function<std::string(std::vector<elastic::FloatSpan>*)>& capture) {
  if (requested_) ++health_checkpoints_;
  requested_ = false;
  if (!writer_rank_) return;
  if (!writer_) {
    elastic::CheckpointOptions co;
    co.log = log_;
    co.fs = o_.fs;
    co.dir = o_.dir;
    co.codec = o_.codec;
    co.incremental = o_.incremental;
    co.full_every = o_.full_every;
    co.keep = o_.keep;
    co.quantize = o_.quantize;
    writer_ = std::make_unique<elastic::CheckpointWriter>(co);
  }
  const auto t = std::chrono::steady_clock::now();
  std::vector<elastic::FloatSpan> floats;
  std::string state = capture(o_.quantize != "none" ? &floats : nullptr);
  const double captured =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  const double blocked_before = writer_->blocked_seconds();
  writer_->Submit(next_step, std::move(state), std::move(floats));
  capture_s_ += captured;
  if (o_.mtbf_s > 0) {
    const double cost = captured + (writer_->blocked_seconds() - blocked_before);
    const double interval_s = elastic::YoungDalyInterval(cost, o_.mtbf_s);
    measured_ = true;
    due_at_ = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(std::min(interval_s, 1e9)));
  }
}

void CheckpointSchedule::Finish(TrainResult* r) {
  if (!writer_) return;
  writer_->Flush();
  TrainResult::CheckpointStats& s = r->checkpoints;
  s = {};
  for (const auto& rec : writer_->records()) {
    ++s.written;
    s.full += rec.full ? 1 : 0;
    s.file_bytes += static_cast<double>(rec.file_bytes);
    s.state_bytes = rec.state_bytes;
    (rec.full ? s.last_full_bytes : s.last_incremental_bytes) = rec.file_bytes;
    s.encode_s += rec.encode_s;
    s.write_s += rec.write_s;
    s.floats_quantised += rec.floats_quantised;
    s.max_abs_error = std::max(s.max_abs_error, rec.max_abs_error);
    r->checkpoint = rec.path;
  }
  s.capture_s = capture_s_;
  s.health = health_checkpoints_;
  s.blocked_s = writer_->blocked_seconds();
}

std::string ReadFile(const std::string& path, const FileSystem& fs) {
  return fs.Read(path, elastic::kMaxCheckpointFileBytes, "checkpoint");
}

// Compression state is per rank (each rank's error-feedback residual differs): one file per rank
// beside the checkpoint, a torch archive of one float tensor per bucket ("bucket<b>") plus the
// world size, the bucket layout and the --compress name (its bytes, uint8) it was written with.
std::string CompressionStatePath(const std::string& dir, int rank) {
  return dir + "/compression.rank" + std::to_string(rank) + ".pt";
}

std::string CaptureCompressionState(int64_t step, const std::vector<std::vector<float>>& states,
                                    int world, const std::vector<size_t>& bucket_elements,
                                    const std::string& compress,
                                    const std::vector<double>& adaptive) {
  torch::serialize::OutputArchive archive;
  archive.write("world_size", torch::tensor(static_cast<int64_t>(world)));
  std::vector<uint8_t> name(compress.begin(), compress.end());
  archive.write(
      "compress",
      torch::from_blob(name.data(), {static_cast<int64_t>(name.size())}, torch::kUInt8).clone());
  std::vector<int64_t> layout(bucket_elements.begin(), bucket_elements.end());
  archive.write("bucket_elements", torch::tensor(layout));
  for (size_t b = 0; b < states.size(); ++b)
    archive.write("bucket" + std::to_string(b),
                  torch::from_blob(const_cast<float*>(states[b].data()),
                                   {static_cast<int64_t>(states[b].size())}, torch::kFloat32)
                      .clone());
  if (!adaptive.empty())
    archive.write("adaptive",
                  torch::from_blob(const_cast<double*>(adaptive.data()),
                                   {static_cast<int64_t>(adaptive.size())}, torch::kFloat64)
                      .clone());
  std::ostringstream out;
  archive.save_to(out);
  return elastic::SealStateFile(step, out.str());
}

std::vector<std::vector<float>> RestoreCompressionState(const std::string& path, int64_t step,
                                                        const std::vector<size_t>& bucket_elements,
                                                        int world, const std::string& compress,
                                                        std::string* why_not,
                                                        std::vector<double>* adaptive) {
  std::vector<std::vector<float>> states;
  if (adaptive) adaptive->clear();
  auto refuse = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return std::vector<std::vector<float>>();
  };
  if (!std::filesystem::exists(path))
    return refuse("no compression state in the checkpoint directory");
  torch::serialize::InputArchive archive;
  std::istringstream in;
  try {
    in.str(elastic::OpenStateFile(ReadFile(path), step, path));
  } catch (const Error& e) {
    return refuse(e.what());
  }
  try {
    archive.load_from(in);
    torch::Tensor w, layout;
    archive.read("world_size", w);
    if (w.item<int64_t>() != world)
      return refuse("the compression state was written for " + std::to_string(w.item<int64_t>()) +
                    " ranks, this run has " + std::to_string(world));
    // A residual belongs to one bucket's elements: restored into another layout (another
    // --bucket-mb, --linear-blocks, or a version that buckets differently) it would be wrong.
    if (!archive.try_read("bucket_elements", layout) ||
        std::vector<int64_t>(layout.data_ptr<int64_t>(),
                             layout.data_ptr<int64_t>() + layout.numel()) !=
            std::vector<int64_t>(bucket_elements.begin(), bucket_elements.end()))
      return refuse("the compression state was written for another bucket layout");
    torch::Tensor name;
    if (!archive.try_read("compress", name))
      return refuse(
          "the compression state does not say which --compress wrote it (an older version)");
    const std::string written(name.data_ptr<uint8_t>(), name.data_ptr<uint8_t>() + name.numel());
    if (written != compress)
      return refuse("the compression state was written for --compress " + written +
                    ", this run has --compress " + compress);
    for (size_t b = 0; b < bucket_elements.size(); ++b) {
      torch::Tensor t;
      archive.read("bucket" + std::to_string(b), t);
      states.emplace_back(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    }
    torch::Tensor a;
    if (adaptive && archive.try_read("adaptive", a) && a.scalar_type() == torch::kFloat64)
      adaptive->assign(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
  } catch (const c10::Error& e) {
    // Damaged past its checksum (or written wrongly): the model's checkpoint is whole and
    // checksummed, and this rank's residuals are a refinement of it. Thrown here, this rank would
    // end while the others waited for it in the steering's first collective until the timeout.
    return refuse(std::string("the compression state cannot be loaded (") +
                  e.what_without_backtrace() + ")");
  } catch (const std::exception& e) {
    return refuse(std::string("the compression state cannot be loaded (") + e.what() + ")");
  }
  return states;
}

}  // namespace cdt::train
