// DeviceCollectives (cdt/device_collectives.h) on the host stand-in device: every dtype and op,
// world sizes 1-4, buffers of many chunks through few slots, over real TCP loopback with ranks as
// threads. The stand-in's streams are threads that run their queues in order (src/device/
// host_device.h), so a pipeline that forgot to wait for an event reads stale bytes here too.
// tests/gpu/ runs the same checks on a CUDA GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "cdt/device_collectives.h"
#include "cdt/error.h"
#include "comm_test_util.h"
#include "device/host_device.h"
#include "device_check.h"

namespace cdt {
namespace {

using namespace cdt::testing;

StagingOptions SmallChunks(int slots) {
  StagingOptions o;
  o.chunk_bytes = 256;  // 1031 f64 elements: 33 chunks through 2 or 3 slots
  o.slots = slots;
  return o;
}

class DeviceCollectivesTest : public ::testing::TestWithParam<int> {};

// The device allreduce leaves in device memory the bits the host allreduce of the same input
// leaves in host memory; buffers of 0, 1, 31 and 1031 elements: up to 33 chunks through 2 or 3
// slots.
TEST_P(DeviceCollectivesTest, AllreduceEveryTypeAndOpSameBitsAsHost) {
  RunRanks(GetParam(), [&](Communicator& comm) {
    HostDevice device;
    for (int slots : {2, 3}) {
      DeviceCollectives dc(comm, device, SmallChunks(slots));
      for (DataType t : kEveryType)
        for (ReduceOp op : kEveryOp)
          for (size_t count : {size_t{0}, size_t{1}, size_t{31}, size_t{1031}})
            if (ReduceOpApplies(op, t)) {
              ASSERT_EQ(CheckDeviceAllreduce(comm, device, dc, t, op, count), "")
                  << "slots " << slots;
            }
    }
  });
}

// With slow copies (every copy sleeps first), a copy the pipeline did not wait for is still in
// flight when its bytes are used: reduced before its copy-out, or a slot refilled before its
// copy-in left.
TEST_P(DeviceCollectivesTest, AllreduceWithSlowCopiesStillExact) {
  RunRanks(GetParam(), [&](Communicator& comm) {
    HostDevice device(std::chrono::microseconds(300));
    DeviceCollectives dc(comm, device, SmallChunks(2));
    for (DataType t : {DataType::kFloat32, DataType::kInt8})
      ASSERT_EQ(CheckDeviceAllreduce(comm, device, dc, t, ReduceOp::kSum, 1031), "");
  });
}

TEST_P(DeviceCollectivesTest, BroadcastFromEveryRoot) {
  const int p = GetParam();
  RunRanks(p, [&](Communicator& comm) {
    HostDevice device;
    DeviceCollectives dc(comm, device, SmallChunks(3));
    for (int root = 0; root < p; ++root)
      for (size_t count : {size_t{0}, size_t{5}, size_t{1031}})
        ASSERT_EQ(CheckDeviceBroadcast(comm, device, dc, count, root), "");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeviceCollectivesTest, ::testing::Values(1, 2, 3, 4));

// The collective sees what the caller's stream wrote before it (a slow "kernel" queued there),
// and work the caller queues after Wait() sees the result; the calling thread never waited for
// the kernel.
TEST(DeviceCollectivesOrder, WaitsForTheCallersStreamAndOrdersItAfterTheResult) {
  RunRanks(2, [&](Communicator& comm) {
    HostDevice device;
    DeviceCollectives dc(comm, device, SmallChunks(3));
    auto caller_stream = device.NewStream();
    auto& caller = static_cast<HostStream&>(*caller_stream);
    const size_t count = 4099;
    auto data = device.AllocateDevice(count * sizeof(float));
    auto* d = static_cast<float*>(data.get());
    std::fill(d, d + count, -100.0f);  // what a collective that did not wait would reduce
    std::atomic<bool> kernel_ran{false};
    caller.Launch([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      for (size_t i = 0; i < count; ++i) d[i] = static_cast<float>(i % 13 + comm.rank());
      kernel_ran = true;
    });
    auto work = dc.Allreduce(caller, d, count, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_FALSE(kernel_ran.load()) << "the submission waited for the caller's stream";
    work->Wait();
    std::vector<float> seen(count, -1.0f);
    caller.Launch([&] { std::memcpy(seen.data(), d, count * sizeof(float)); });
    ASSERT_TRUE(caller.Record()->WaitFor(std::chrono::seconds(10)));
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(seen[i], static_cast<float>(2 * (i % 13) + 1)) << "element " << i;
  });
}

// A caller's kernel that outlasts the copy timeout fails the operation with kTimeout naming the
// copy, aborts the communicator (later operations fail at once) and does not hang.
TEST(DeviceCollectivesFailure, ACopyThatDoesNotCompleteTimesOut) {
  RunRanks(1, [&](Communicator& comm) {
    HostDevice device;
    StagingOptions o = SmallChunks(3);
    o.copy_timeout = std::chrono::milliseconds(100);
    // The buffer and the caller's stream outlive the collectives: the copy-out that timed out
    // is still queued behind the kernel (the contract in cdt/device_collectives.h).
    auto caller_stream = device.NewStream();
    auto& caller = static_cast<HostStream&>(*caller_stream);
    auto data = device.AllocateDevice(64 * sizeof(float));
    DeviceCollectives dc(comm, device, o);
    caller.Launch([] { std::this_thread::sleep_for(std::chrono::milliseconds(600)); });
    auto work = dc.Allreduce(caller, data.get(), 64, DataType::kFloat32, ReduceOp::kSum);
    try {
      work->Wait();
      FAIL() << "expected a timeout";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
      EXPECT_NE(std::string(e.what()).find("copy-out of chunk 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("device allreduce #1"), std::string::npos) << e.what();
    }
    EXPECT_EQ(work->completion(), nullptr);
    auto later = dc.Allreduce(caller, data.get(), 64, DataType::kFloat32, ReduceOp::kSum);
    try {
      later->Wait();
      FAIL() << "expected kAborted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kAborted) << e.what();
      EXPECT_NE(std::string(e.what()).find("an earlier device operation failed"), std::string::npos)
          << e.what();
    }
  });
}

// A peer lost in a chunk's host collective fails the device operation with the communicator's
// error, naming the peer.
TEST(DeviceCollectivesFailure, APeerLostMidPipelineFailsTheOperation) {
  testing::RankSetup setup;
  setup.base.timeout = std::chrono::seconds(10);
  setup.base.shared_memory = false;  // the loss is seen on the TCP connection
  RunRanks(
      2,
      [&](Communicator& comm) {
        HostDevice device;
        DeviceCollectives dc(comm, device, SmallChunks(3));
        auto caller = device.NewStream();
        const size_t count = 100000;
        auto data = device.AllocateDevice(count * sizeof(float));
        std::memset(data.get(), 0, count * sizeof(float));
        if (comm.rank() == 1) {
          comm.Abort();  // rank 1 goes away before the collective
          return;
        }
        try {
          dc.Allreduce(*caller, data.get(), count, DataType::kFloat32, ReduceOp::kSum)->Wait();
          ADD_FAILURE() << "expected the peer's loss";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kPeerLost) << e.what();
          EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
        }
      },
      setup);
}

TEST(DeviceCollectivesOptions, BadArgumentsAreRefused) {
  RunRanks(2, [&](Communicator& comm) {
    HostDevice device;
    StagingOptions one_slot;
    one_slot.slots = 1;
    EXPECT_THROW(DeviceCollectives(comm, device, one_slot), Error);
    DeviceCollectives dc(comm, device);
    auto caller = device.NewStream();
    auto data = device.AllocateDevice(16);
    EXPECT_THROW(dc.Broadcast(*caller, data.get(), 4, DataType::kFloat32, 2), Error);
    EXPECT_THROW(dc.Allreduce(*caller, data.get(), 4, DataType::kFloat32, ReduceOp::kBxor), Error);
  });
}

}  // namespace
}  // namespace cdt
