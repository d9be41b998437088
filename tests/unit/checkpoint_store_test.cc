// Checkpoint files (src/elastic/checkpoint_store.h): round trips through every codec, increments
// that write only what changed, corruption and truncation caught by checksums with a fallback to
// the previous checkpoint, retention, and a writer killed with SIGKILL mid-write (a real
// process) leaving a loadable directory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "cdt/error.h"
#include "elastic/checkpoint_store.h"
#include "fake_file_system.h"

namespace cdt::elastic {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const std::string d =
      fs::temp_directory_path() / ("cdt-ckpt-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// A state like a model's: float32 weights, then a small changing tail (a step counter).
std::string State(size_t floats, int step, double drift = 1e-3) {
  std::mt19937 rng(42);
  std::normal_distribution<float> w(0.0f, 0.05f);
  std::vector<float> v(floats);
  for (auto& x : v) x = w(rng);
  for (size_t i = 0; i < floats; ++i)
    v[i] += static_cast<float>(drift * step * std::sin(0.001 * i));
  std::string s(reinterpret_cast<const char*>(v.data()), floats * 4);
  s += "step=" + std::to_string(step);
  return s;
}

size_t CountCheckpoints(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".cdtc") ++n;
  return n;
}

std::vector<fs::path> Files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CheckpointStore, RoundTripsThroughEveryCodec) {
  for (const std::string codec : {"zstd", "lz4", "none"}) {
    CheckpointOptions o;
    o.dir = TempDir("codec-" + codec);
    o.codec = codec;
    const std::string a = State(100000, 1);
    {
      CheckpointWriter w(o);
      w.Submit(7, a);
      w.Flush();
      ASSERT_EQ(w.records().size(), 1u);
      EXPECT_TRUE(w.records()[0].full);
    }
    auto c = LoadNewestCheckpoint(o.dir);
    ASSERT_TRUE(c) << codec;
    EXPECT_EQ(c->step, 7);
    EXPECT_EQ(c->state, a) << codec;
    EXPECT_TRUE(c->warnings.empty());
  }
  // Empty and odd-sized states too.
  CheckpointOptions o;
  o.dir = TempDir("sizes");
  o.chunk_bytes = 100;
  CheckpointWriter w(o);
  for (size_t n : {size_t{0}, size_t{1}, size_t{101}, size_t{1003}}) {
    w.Submit(static_cast<int64_t>(n), std::string(n, 'x') + std::to_string(n));
    w.Flush();
    EXPECT_EQ(ReadCheckpointFile(w.records().back().path).state,
              std::string(n, 'x') + std::to_string(n));
  }
}

TEST(CheckpointStore, IncrementsWriteWhatChangedAndLoadExactly) {
  CheckpointOptions o;
  o.dir = TempDir("incr");
  o.incremental = true;
  o.full_every = 4;
  CheckpointWriter w(o);
  std::vector<std::string> states;
  for (int step = 0; step < 6; ++step) {
    states.push_back(State(200000, step));
    w.Submit(step, states.back());
    w.Flush();
  }
  auto rec = w.records();
  ASSERT_EQ(rec.size(), 6u);
  EXPECT_TRUE(rec[0].full);
  EXPECT_FALSE(rec[1].full);
  EXPECT_TRUE(rec[4].full);  // every 4th is full
  // Every float moved a little: no chunk is unchanged, but the XOR with the base is mostly zero
  // in its high bytes.
  EXPECT_LT(rec[1].file_bytes, rec[0].file_bytes);
  for (int step = 0; step < 6; ++step) {
    const auto& r = rec[static_cast<size_t>(step)];
    EXPECT_EQ(ReadCheckpointFile(r.path).state, states[static_cast<size_t>(step)]) << r.path;
  }
  // A state whose bytes did not change is stored as references to the base.
  w.Submit(6, states[4]);
  w.Flush();
  EXPECT_EQ(w.records().back().chunks_unchanged, w.records().back().chunks);
  EXPECT_LT(w.records().back().file_bytes, 2000u);
  EXPECT_EQ(LoadNewestCheckpoint(o.dir)->state, states[4]);
}

// Quantised increments (lossy): the float spans come back within half a quantisation step of
// their block (max |difference| / 254), every other byte exactly, the chunks' and the state's
// checksums hold for what is restored, and the increment is a fraction of a full checkpoint.
TEST(CheckpointStore, QuantisedIncrementsRestoreFloatsWithinHalfAStepAndTheRestExactly) {
  CheckpointOptions o;
  o.dir = TempDir("quant");
  o.incremental = true;
  o.quantize = "int8";
  CheckpointWriter w(o);
  const size_t n = 300001;  // odd: the last block and the last chunk are partial
  const std::string head = "head:" + std::string(123, 'h');  // unaligned text before the floats
  auto make = [&](int step) {
    std::string s = State(n, step);
    return head + std::string(4, '\0') + s;  // floats at byte 132: word-aligned
  };
  const uint64_t floats_at = head.size() + 4;
  ASSERT_EQ(floats_at % 4, 0u);
  const std::string full = make(0);
  w.Submit(0, full, {{floats_at, n}});
  w.Flush();
  std::string next = make(1);
  next[7] = 'X';  // a change outside the floats must come back exactly
  w.Submit(1, next, {{floats_at, n}});
  w.Flush();
  const auto rec = w.records();
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_TRUE(rec[0].full);
  EXPECT_EQ(rec[0].floats_quantised, 0u);  // a full checkpoint is exact
  EXPECT_EQ(rec[1].floats_quantised, n);
  EXPECT_LE(static_cast<double>(rec[1].file_bytes), 0.30 * static_cast<double>(rec[0].file_bytes));
  const std::string back = ReadCheckpointFile(rec[1].path).state;
  ASSERT_EQ(back.size(), next.size());
  EXPECT_EQ(back.substr(0, floats_at), next.substr(0, floats_at));
  EXPECT_EQ(back.substr(floats_at + 4 * n), next.substr(floats_at + 4 * n));
  // Blocks of 256 values start afresh in each chunk (the writer quantises chunk by chunk).
  std::vector<size_t> starts;
  for (size_t i = 0; i < n;) {
    starts.push_back(i);
    const size_t chunk_end = (floats_at + 4 * i) / o.chunk_bytes * o.chunk_bytes + o.chunk_bytes;
    const size_t in_chunk = (chunk_end - (floats_at + 4 * i)) / 4;
    for (size_t k = 256; k < in_chunk && i + k < n; k += 256) starts.push_back(i + k);
    i += in_chunk;
  }
  starts.push_back(n);
  double worst = 0;
  for (size_t b = 0; b + 1 < starts.size(); ++b) {
    const size_t block = starts[b], end = starts[b + 1];
    float largest = 0;
    for (size_t i = block; i < end; ++i) {
      float a, b;
      std::memcpy(&a, next.data() + floats_at + 4 * i, 4);
      std::memcpy(&b, full.data() + floats_at + 4 * i, 4);
      largest = std::max(largest, std::fabs(a - b));
    }
    for (size_t i = block; i < end; ++i) {
      float saved, restored;
      std::memcpy(&saved, next.data() + floats_at + 4 * i, 4);
      std::memcpy(&restored, back.data() + floats_at + 4 * i, 4);
      const double err = std::fabs(double(restored) - double(saved));
      // Half a step, plus the float32 rounding of base + code * scale.
      ASSERT_LE(err, largest / 254.0 * 1.001 + 1e-8) << "value " << i;
      worst = std::max(worst, err);
    }
  }
  EXPECT_GT(worst, 0.0);  // it is lossy, and says by how much
  EXPECT_DOUBLE_EQ(rec[1].max_abs_error, worst);
  EXPECT_EQ(LoadNewestCheckpoint(o.dir)->state, back);

  // A non-finite value: its chunk is stored exactly, the others still quantised.
  std::string bad = make(2);
  const float inf = INFINITY;
  std::memcpy(bad.data() + floats_at + 4 * 10, &inf, 4);
  w.Submit(2, bad, {{floats_at, n}});
  w.Flush();
  const auto r2 = w.records().back();
  EXPECT_LT(r2.floats_quantised, n);
  EXPECT_GT(r2.floats_quantised, n / 2);
  const std::string back2 = ReadCheckpointFile(r2.path).state;
  EXPECT_EQ(back2.substr(0, o.chunk_bytes), bad.substr(0, o.chunk_bytes));

  // Spans out of order, overlapping, unaligned or past the end are refused.
  EXPECT_THROW(w.Submit(3, next, {{floats_at + 1, 4}}), Error);
  EXPECT_THROW(w.Submit(3, next, {{floats_at, n}, {floats_at + 8, 2}}), Error);
  EXPECT_THROW(w.Submit(3, next, {{floats_at, n + 100}}), Error);
}

TEST(CheckpointStore, AFlippedByteFallsBackToThePreviousCheckpoint) {
  CheckpointOptions o;
  o.dir = TempDir("flip");
  CheckpointWriter w(o);
  w.Submit(1, State(50000, 1));
  w.Flush();
  w.Submit(2, State(50000, 2));
  w.Flush();
  const std::string newest = w.records().back().path;
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(5000);
    char c;
    f.get(c);
    f.seekp(5000);
    f.put(static_cast<char>(c ^ 0x10));
  }
  auto c = LoadNewestCheckpoint(o.dir);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 1);
  EXPECT_EQ(c->state, State(50000, 1));
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find(newest), std::string::npos) << c->warnings[0];
  EXPECT_NE(c->warnings[0].find("checksum"), std::string::npos) << c->warnings[0];
}

// A header of the checkpoint format (docs/checkpoint-format.md) with whatever fields a hostile
// or damaged file has, its header checksum right, and no records.
std::string Header(uint8_t kind, int64_t step, int64_t base, uint64_t state_bytes, uint32_t chunk,
                   uint32_t chunks) {
  std::string h("CDTCKPT1", 8);
  auto put = [&](auto v) { h.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(uint32_t{1});
  put(kind);
  put(uint8_t{0});  // no codec
  put(uint16_t{0});
  put(step);
  put(base);
  put(state_bytes);
  put(chunk);
  put(chunks);
  put(uint32_t{0});
  put(static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(h.data()), h.size())));
  h += std::string("CDTCEND1", 8);
  put(uint32_t{0});
  return h;
}

// Planted or damaged files newer than the last good checkpoint: each is skipped with a line
// saying why, never a crash or a hang, and the job resumes from the last good one.
TEST(CheckpointStore, HostileFilesAreSkippedNeverACrash) {
  CheckpointOptions o;
  o.dir = TempDir("hostile");
  {
    CheckpointWriter w(o);
    w.Submit(1, State(5000, 1));
  }
  auto plant = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(o.dir + "/" + name, std::ios::binary) << bytes;
  };
  // Its own base: an increment of step 3 on base 3, in the file that base would be.
  plant("ckpt-000000000003.full.cdtc", Header(1, 3, 3, 0, 64, 0));
  // 2^62 bytes of state in 2^31 chunks of 2 GiB, in a file of 72 bytes.
  plant("ckpt-000000000004.full.cdtc", Header(0, 4, -1, uint64_t{1} << 62, 1u << 31, 1u << 31));
  // An increment whose base is not a full checkpoint but claims to be.
  plant("ckpt-000000000005.incr-000000000003.cdtc", Header(1, 5, 3, 0, 64, 0));
  auto c = LoadNewestCheckpoint(o.dir);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 1);
  EXPECT_EQ(c->state, State(5000, 1));
  ASSERT_EQ(c->warnings.size(), 3u);
  EXPECT_NE(c->warnings[0].find("ckpt-000000000005"), std::string::npos) << c->warnings[0];
  EXPECT_NE(c->warnings[1].find("inconsistent header"), std::string::npos) << c->warnings[1];
  EXPECT_NE(c->warnings[2].find("ckpt-000000000003"), std::string::npos) << c->warnings[2];
  for (const auto& w : c->warnings)
    EXPECT_NE(w.find("using an older checkpoint"), std::string::npos) << w;
}

TEST(CheckpointStore, TruncatedFilesAndMissingBasesAreSkipped) {
  CheckpointOptions o;
  o.dir = TempDir("trunc");
  o.incremental = true;
  CheckpointWriter w(o);
  for (int step = 1; step <= 3; ++step) {
    w.Submit(step, State(30000, step));
    w.Flush();
  }
  const auto rec = w.records();
  fs::resize_file(rec[2].path, fs::file_size(rec[2].path) / 2);
  auto c = LoadNewestCheckpoint(o.dir);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 2);
  EXPECT_NE(c->warnings.at(0).find("truncated"), std::string::npos) << c->warnings[0];
  fs::remove(rec[0].path);  // the base of both increments
  std::vector<std::string> skipped;
  EXPECT_FALSE(LoadNewestCheckpoint(o.dir, &skipped));
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[1].find("is missing"), std::string::npos) << skipped[1];
}

TEST(CheckpointStore, RetentionKeepsTheNewestFullCheckpointsAndTheirIncrements) {
  CheckpointOptions o;
  o.dir = TempDir("keep");
  o.incremental = true;
  o.full_every = 2;
  o.keep = 2;
  CheckpointWriter w(o);
  for (int step = 0; step < 7; ++step) {  // full at 0, 2, 4, 6
    w.Submit(step, State(1000, step));
    w.Flush();
  }
  std::vector<std::string> names;
  for (const auto& p : Files(o.dir)) names.push_back(p.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"ckpt-000000000004.full.cdtc",
                                             "ckpt-000000000005.incr-000000000004.cdtc",
                                             "ckpt-000000000006.full.cdtc"}));
}

TEST(CheckpointStore, AWriterKilledMidWriteLeavesTheLastCheckpointLoadable) {
  // A real process writes 16 MB checkpoints in a loop; SIGKILL at a random moment; every
  // checkpoint on disk must then load, and the newest must be a whole one.
  const std::string dir = TempDir("kill");
  const size_t floats = 4 << 20;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      CheckpointOptions o;
      o.dir = dir;
      o.codec = "lz4";
      o.keep = 100;
      CheckpointWriter w(o);
      for (int step = 100 * attempt;; ++step) w.Submit(step, State(floats, step));
    }
    // Let it write at least one, then kill it somewhere in a later write.
    const size_t before = CountCheckpoints(dir);
    for (int i = 0; i < 600 && CountCheckpoints(dir) < before + 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(37 * (attempt + 1)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    auto c = LoadNewestCheckpoint(dir);
    ASSERT_TRUE(c) << "attempt " << attempt;
    EXPECT_TRUE(c->warnings.empty()) << c->warnings.at(0);
    EXPECT_EQ(c->state, State(floats, static_cast<int>(c->step)));
  }
}

TEST(CheckpointStore, YoungDalyInterval) {
  EXPECT_DOUBLE_EQ(YoungDalyInterval(2.0, 3600.0), std::sqrt(2 * 2.0 * 3600.0));
  EXPECT_DOUBLE_EQ(YoungDalyInterval(0.0, 3600.0), 0.0);
}

TEST(CheckpointStore, BadOptionsAreRefused) {
  CheckpointOptions o;
  o.dir = TempDir("bad");
  o.codec = "gzip";
  EXPECT_THROW(CheckpointWriter{o}, Error);
  o.codec = "zstd";
  o.quantize = "int4";
  EXPECT_THROW(CheckpointWriter{o}, Error);
  o.quantize = "none";
  o.dir = "";
  EXPECT_THROW(CheckpointWriter{o}, Error);
}

}  // namespace
}  // namespace cdt::elastic

// The file-system seam (common/file_system.h) with a fake disk: a full disk fails the write that
// meets it — the error reaches the trainer at its next Submit or Flush — and costs nothing
// already written: the newest checkpoint before it still loads, increments and all.
namespace cdt::elastic {
namespace {

TEST(CheckpointStore, AFullDiskFailsTheWriteAndKeepsTheCheckpointsBeforeIt) {
  testing::FakeFileSystem disk;
  CheckpointOptions o;
  o.dir = "/ckpt";
  o.incremental = true;
  o.full_every = 2;
  o.chunk_bytes = 4096;
  o.fs = &disk;
  o.log = Log(LogLevel::kError, [](LogLevel, std::string_view) {});
  std::vector<std::string> states;
  {
    CheckpointWriter w(o);
    for (int step = 1; step <= 3; ++step) {
      states.push_back(State(20000, step));
      w.Submit(step, states.back());
    }
    w.Flush();
    EXPECT_EQ(disk.writes(), 3);
    disk.SetFull(true);
    w.Submit(4, State(20000, 4));
    try {
      w.Flush();
      FAIL() << "a write to a full disk succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kIo);
      EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("/ckpt/"), std::string::npos) << e.what();
    }
  }
  const auto c = LoadNewestCheckpoint(o.dir, nullptr, disk);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 3);  // an increment on step 2's full checkpoint
  EXPECT_EQ(c->state, states[2]);
}

// A read error is not a missing file: the checkpoint that cannot be read is skipped with the
// reason, and the older one is used.
TEST(CheckpointStore, AnUnreadableCheckpointIsSkippedWithItsReason) {
  testing::FakeFileSystem disk;
  CheckpointOptions o;
  o.dir = "/ckpt";
  o.fs = &disk;
  std::vector<std::string> states;
  {
    CheckpointWriter w(o);
    for (int step = 1; step <= 2; ++step) {
      states.push_back(State(5000, step));
      w.Submit(step, states.back());
    }
    w.Flush();
  }
  std::vector<std::string> names = disk.List("/ckpt");
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 2u);
  disk.SetUnreadable("/ckpt/" + names[1]);
  const auto c = LoadNewestCheckpoint(o.dir, nullptr, disk);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 1);
  EXPECT_EQ(c->state, states[0]);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("Input/output error"), std::string::npos) << c->warnings[0];
}

}  // namespace
}  // namespace cdt::elastic
