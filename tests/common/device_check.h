// Checks of DeviceCollectives shared by the host stand-in's tests (tests/unit) and the GPU's
// (tests/gpu): only the cdt::Device interface moves bytes, so the same check runs on either.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "cdt/device_collectives.h"
#include "common/element_access.h"

namespace cdt::testing {

inline const std::vector<DataType> kEveryType = {
    DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
    DataType::kInt32,   DataType::kInt64,   DataType::kInt8,    DataType::kUInt8,
    DataType::kBool,    DataType::kInt16};
inline const std::vector<ReduceOp> kEveryOp = {ReduceOp::kSum, ReduceOp::kAvg,     ReduceOp::kMax,
                                               ReduceOp::kMin, ReduceOp::kProduct, ReduceOp::kBand,
                                               ReduceOp::kBor, ReduceOp::kBxor};

// Inputs whose reduction is exact in every type, so that any order of reduction gives the same
// bits: small integers for sums, 1 and 2 for products (powers of two).
inline double DeviceInput(ReduceOp op, int rank, size_t i) {
  if (op == ReduceOp::kProduct)
    return 1.0 + static_cast<double>((i + static_cast<size_t>(rank)) % 2);
  return static_cast<double>((i * 3 + static_cast<size_t>(rank) * 5) % 11);
}

inline std::vector<unsigned char> DeviceInputs(DataType t, ReduceOp op, int rank, size_t count) {
  std::vector<unsigned char> b(count * ElementSize(t), 0);
  for (size_t i = 0; i < count; ++i) StoreElement(b.data(), t, i, DeviceInput(op, rank, i));
  return b;
}

// Host bytes to a new device buffer and back, through pinned memory on a stream of `device`.
inline std::shared_ptr<void> Upload(Device& device, const std::vector<unsigned char>& bytes) {
  auto pinned = device.AllocatePinned(bytes.size());
  if (!bytes.empty()) std::memcpy(pinned.get(), bytes.data(), bytes.size());
  auto on_device = device.AllocateDevice(bytes.size());
  auto stream = device.NewStream();
  stream->CopyToDevice(on_device.get(), pinned.get(), bytes.size());
  if (!stream->Record()->WaitFor(std::chrono::seconds(30)))
    throw std::runtime_error("upload hangs");
  return on_device;
}

inline std::vector<unsigned char> Download(Device& device, DeviceStream& after,
                                           const void* on_device, size_t bytes) {
  auto pinned = device.AllocatePinned(bytes);
  after.CopyToHost(pinned.get(), on_device, bytes);
  if (!after.Record()->WaitFor(std::chrono::seconds(30)))
    throw std::runtime_error("download hangs");
  const auto* p = static_cast<const unsigned char*>(pinned.get());
  return std::vector<unsigned char>(p, p + bytes);
}

// One device allreduce against the host allreduce of the same input on the same communicator:
// "" when the bits agree, else what differs.
inline std::string CheckDeviceAllreduce(Communicator& comm, Device& device, DeviceCollectives& dc,
                                        DataType t, ReduceOp op, size_t count) {
  std::vector<unsigned char> want = DeviceInputs(t, op, comm.rank(), count);
  comm.Allreduce(want.data(), count, t, op)->Wait();
  auto data = Upload(device, DeviceInputs(t, op, comm.rank(), count));
  auto caller = device.NewStream();
  dc.Allreduce(*caller, data.get(), count, t, op)->Wait();
  std::vector<unsigned char> got = Download(device, *caller, data.get(), want.size());
  if (got == want) return "";
  size_t i = 0;
  while (std::memcmp(&got[i * ElementSize(t)], &want[i * ElementSize(t)], ElementSize(t)) == 0) ++i;
  return std::string(DataTypeName(t)) + " " + ReduceOpName(op) + " count " + std::to_string(count) +
         " rank " + std::to_string(comm.rank()) + " element " + std::to_string(i) + ": got " +
         std::to_string(LoadElement(got.data(), t, i)) + " want " +
         std::to_string(LoadElement(want.data(), t, i));
}

// A device broadcast of int64 values from `root`: "" when every rank holds the root's values.
inline std::string CheckDeviceBroadcast(Communicator& comm, Device& device, DeviceCollectives& dc,
                                        size_t count, int root) {
  std::vector<int64_t> mine(count, -1), want(count);
  for (size_t i = 0; i < count; ++i) want[i] = static_cast<int64_t>(i * 7) + root;
  if (comm.rank() == root) mine = want;
  const size_t bytes = count * sizeof(int64_t);
  std::vector<unsigned char> raw(bytes);
  if (bytes) std::memcpy(raw.data(), mine.data(), bytes);
  auto data = Upload(device, raw);
  auto caller = device.NewStream();
  dc.Broadcast(*caller, data.get(), count, DataType::kInt64, root)->Wait();
  std::vector<unsigned char> got = Download(device, *caller, data.get(), bytes);
  if (bytes == 0 || std::memcmp(got.data(), want.data(), bytes) == 0) return "";
  return "broadcast from " + std::to_string(root) + " of " + std::to_string(count) +
         " int64 differs on rank " + std::to_string(comm.rank());
}

}  // namespace cdt::testing
