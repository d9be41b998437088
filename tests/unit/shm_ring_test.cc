// The shared-memory ring (comm/transport/shm_ring.h): bytes in order across threads and across
// processes (fork), wrap-around, a stalled or stopped peer timing out, Abort waking a waiter,
// garbage refused, and the segment's name gone after Unlink.
#include "comm/transport/shm_ring.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cdt/error.h"

namespace cdt::shm {
namespace {

using std::chrono::milliseconds;

std::string UniqueName(const char* what) {
  std::random_device rd;
  return "/cdt-test-" + std::string(what) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(rd());
}

uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 13); }

TEST(ShmRing, BytesArriveInOrderAcrossThreadsAndWrapAround) {
  constexpr size_t kCapacity = 4096;
  std::vector<unsigned char> memory(Ring::BytesFor(kCapacity) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(memory.data()) + 63) & ~uintptr_t{63});
  Ring writer = Ring::Create(aligned, kCapacity);
  Ring reader = Ring::Attach(aligned);
  constexpr size_t kBytes = 3 << 20;  // 768 wraps of the ring
  std::vector<unsigned char> in(kBytes), out(kBytes);
  for (size_t i = 0; i < kBytes; ++i) in[i] = Pattern(i);
  std::thread t([&] {
    for (size_t at = 0; at < kBytes; at += 1000)  // odd-sized pieces
      writer.Write(in.data() + at, std::min<size_t>(1000, kBytes - at), milliseconds(10000), "w");
  });
  for (size_t at = 0; at < kBytes; at += 777)
    reader.Read(out.data() + at, std::min<size_t>(777, kBytes - at), milliseconds(10000), "r");
  t.join();
  EXPECT_EQ(in, out);
}

TEST(ShmRing, AnotherProcessReadsWhatThisOneWrites) {
  const std::string name = UniqueName("xproc");
  constexpr size_t kCapacity = 64 << 10;
  Segment seg = Segment::Create(name, Ring::BytesFor(kCapacity));
  Ring ring = Ring::Create(seg.data(), kCapacity);
  constexpr size_t kBytes = 16 << 20;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int ok = 1;
    try {
      Segment mine = Segment::Open(name);
      Ring r = Ring::Attach(mine.data());
      std::vector<unsigned char> buf(1 << 16);
      for (size_t at = 0; at < kBytes; at += buf.size()) {
        r.Read(buf.data(), buf.size(), milliseconds(10000), "parent");
        for (size_t i = 0; i < buf.size(); ++i)
          if (buf[i] != Pattern(at + i)) ok = 0;
      }
    } catch (...) {
      ok = 0;
    }
    _exit(ok ? 0 : 1);
  }
  std::vector<unsigned char> chunk(100000);
  for (size_t at = 0; at < kBytes; at += chunk.size()) {
    const size_t n = std::min(chunk.size(), kBytes - at);
    for (size_t i = 0; i < n; ++i) chunk[i] = Pattern(at + i);
    ring.Write(chunk.data(), n, milliseconds(10000), "child");
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child read wrong bytes";
  EXPECT_TRUE(seg.Unlink());
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + name));
}

TEST(ShmRing, AStalledReaderOrAStoppedOneTimesOutNamingThePeer) {
  const std::string name = UniqueName("stop");
  constexpr size_t kCapacity = 4096;
  Segment seg = Segment::Create(name, Ring::BytesFor(kCapacity));
  seg.Unlink();  // the mapping lives on; nothing is left behind whatever happens next
  Ring ring = Ring::Create(seg.data(), kCapacity);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // reads one byte, then stops (SIGSTOP), as a hung process would
    unsigned char b;
    ring.Read(&b, 1, milliseconds(10000), "parent");
    raise(SIGSTOP);
    _exit(0);
  }
  std::vector<unsigned char> big(3 * kCapacity, 7);
  try {
    ring.Write(big.data(), big.size(), milliseconds(300), "rank 1 (pid " + std::to_string(child) + ")");
    ADD_FAILURE() << "a write into a stopped reader's full ring returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1 (pid"), std::string::npos) << e.what();
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(ShmRing, AbortWakesAWaitingReaderAtOnce) {
  constexpr size_t kCapacity = 4096;
  std::vector<unsigned char> memory(Ring::BytesFor(kCapacity) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(memory.data()) + 63) & ~uintptr_t{63});
  Ring ring = Ring::Create(aligned, kCapacity);
  std::atomic<int> code{-1};
  std::thread t([&] {
    unsigned char b;
    try {
      ring.Read(&b, 1, milliseconds(60000), "peer");
    } catch (const Error& e) {
      code = static_cast<int>(e.code());
    }
  });
  std::this_thread::sleep_for(milliseconds(50));  // let it sleep on the futex
  ring.Abort();
  t.join();  // a missed wake-up would hold this for the 60 s timeout, then report kTimeout
  EXPECT_EQ(code.load(), static_cast<int>(ErrorCode::kAborted));
  EXPECT_TRUE(ring.aborted());
  unsigned char b = 0;
  EXPECT_THROW(ring.Write(&b, 1, milliseconds(10), "peer"), Error);
}

TEST(ShmRing, GarbageAndBadCapacitiesAreRefused) {
  alignas(64) unsigned char junk[256] = {1, 2, 3};
  try {
    Ring::Attach(junk);
    ADD_FAILURE() << "attached to garbage";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kProtocol);
  }
  std::vector<unsigned char> memory(Ring::BytesFor(8192) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(memory.data()) + 63) & ~uintptr_t{63});
  EXPECT_THROW(Ring::Create(aligned, 5000), Error);
  EXPECT_THROW(Ring::Create(aligned, 1024), Error);
  EXPECT_THROW(Segment::Open(UniqueName("missing")), Error);
  const std::string name = UniqueName("twice");
  Segment a = Segment::Create(name, 4096);
  EXPECT_THROW(Segment::Create(name, 4096), Error);  // O_EXCL: never someone else's segment
  EXPECT_TRUE(a.Unlink());
}

}  // namespace
}  // namespace cdt::shm
