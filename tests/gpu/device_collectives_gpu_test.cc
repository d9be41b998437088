// DeviceCollectives on a CUDA GPU (make test-gpu): ranks as threads sharing cuda:0, each with its
// own streams and staging, over real TCP loopback. Every test skips, naming what it needs, where
// this process sees no CUDA device (CI compiles and links this file without one).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cdt/device_collectives.h"
#include "cdt/error.h"
#include "comm_test_util.h"
#include "device/cuda_device.h"
#include "device_check.h"
#include "gpu_kernels.h"

namespace cdt {
namespace {

using namespace cdt::testing;

#define SKIP_WITHOUT_GPU()                                                                       \
  do {                                                                                           \
    std::string why;                                                                             \
    if (CudaDevice::Count(&why) == 0)                                                            \
      GTEST_SKIP() << "needs a CUDA GPU (" << why << "); bench/device/run.sh runs these on one"; \
  } while (0)

class GpuCollectivesTest : public ::testing::TestWithParam<int> {};

// The same bits as the host allreduce of the same input, every type and op, buffers of one chunk
// and of many (small chunks: 1031 f64 = 33 chunks through 3 slots).
TEST_P(GpuCollectivesTest, AllreduceEveryTypeAndOpSameBitsAsHost) {
  SKIP_WITHOUT_GPU();
  RunRanks(GetParam(), [&](Communicator& comm) {
    CudaDevice device(0);
    for (size_t chunk_bytes : {size_t{256}, size_t{4} << 20}) {
      StagingOptions o;
      o.chunk_bytes = chunk_bytes;
      DeviceCollectives dc(comm, device, o);
      for (DataType t : kEveryType)
        for (ReduceOp op : kEveryOp)
          for (size_t count : {size_t{0}, size_t{1}, size_t{1031}, size_t{3} << 20})
            if (ReduceOpApplies(op, t) && (count < (size_t{1} << 20) || op == ReduceOp::kSum)) {
              ASSERT_EQ(CheckDeviceAllreduce(comm, device, dc, t, op, count), "")
                  << "chunk " << chunk_bytes;
            }
    }
  });
}

TEST_P(GpuCollectivesTest, BroadcastFromEveryRoot) {
  SKIP_WITHOUT_GPU();
  const int p = GetParam();
  RunRanks(p, [&](Communicator& comm) {
    CudaDevice device(0);
    StagingOptions o;
    o.chunk_bytes = 4096;
    DeviceCollectives dc(comm, device, o);
    for (int root = 0; root < p; ++root)
      for (size_t count : {size_t{0}, size_t{5}, size_t{100003}})
        ASSERT_EQ(CheckDeviceBroadcast(comm, device, dc, count, root), "");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GpuCollectivesTest, ::testing::Values(1, 2, 3, 4));

// Stream order without host synchronisation: a kernel queued on the caller's stream writes the
// input after ~200 ms; the submission returns while it still runs (no host wait), the collective
// reduces what the kernel wrote (the copy-out waited for it on the device), and a copy the caller
// queues on its stream after Wait() reads the result.
TEST(GpuCollectivesOrder, WaitsForTheCallersStreamAndOrdersItAfterTheResult) {
  SKIP_WITHOUT_GPU();
  RunRanks(2, [&](Communicator& comm) {
    CudaDevice device(0);
    DeviceCollectives dc(comm, device);
    cudaStream_t raw = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking), cudaSuccess);
    auto caller = device.WrapStream(raw);
    const size_t count = (size_t{16} << 20) / sizeof(float);  // 4 chunks of 4 MiB
    auto data = device.AllocateDevice(count * sizeof(float));
    ASSERT_EQ(cudaMemset(data.get(), 0xff, count * sizeof(float)), cudaSuccess);  // NaNs
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the test's own set-up, not the engine's
    LaunchSpinThenFill(raw, static_cast<float*>(data.get()), count, static_cast<float>(comm.rank()),
                       200.0);
    auto work = dc.Allreduce(*caller, data.get(), count, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(cudaStreamQuery(raw), cudaErrorNotReady)
        << "the submission waited for the caller's kernel on the host";
    work->Wait();
    std::vector<unsigned char> got = Download(device, *caller, data.get(), count * sizeof(float));
    const auto* f = reinterpret_cast<const float*>(got.data());
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(f[i], static_cast<float>(2 * (i % 13) + 1)) << "element " << i;
    caller.reset();
    cudaStreamDestroy(raw);
  });
}

TEST(GpuDevice, ANonexistentDeviceIsNamed) {
  SKIP_WITHOUT_GPU();
  try {
    CudaDevice device(1000);
    FAIL() << "cuda:1000 opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1000 does not exist"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cdt
