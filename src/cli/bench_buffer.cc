#include "cli/bench_buffer.h"

#include <chrono>
#include <cstring>

#include "cdt/error.h"

namespace cdt::cli {
namespace {

void Await(DeviceStream& stream, const char* what) {
  constexpr auto kLimit = std::chrono::seconds(60);
  if (!stream.Record()->WaitFor(kLimit))
    throw Error(ErrorCode::kTimeout, std::string("bench allreduce: ") + what + " on " +
                                         stream.name() + " did not complete within 60 s");
}

}  // namespace

BenchBuffer::BenchBuffer(Communicator& comm, Device* device, size_t bytes, StagingOptions staging)
    : comm_(comm), device_(device), host_(bytes) {
  if (!device_) return;
  pinned_ = device_->AllocatePinned(bytes);
  on_device_ = device_->AllocateDevice(bytes);
  caller_ = device_->NewStream();
  staged_ = std::make_unique<DeviceCollectives>(comm, *device_, staging);
}

void BenchBuffer::Upload(size_t bytes) {
  if (!device_) return;
  std::memcpy(pinned_.get(), host_.data(), bytes);
  caller_->CopyToDevice(on_device_.get(), pinned_.get(), bytes);
  Await(*caller_, "the upload of the input");
}

void BenchBuffer::Download(size_t bytes) {
  if (!device_) return;
  caller_->CopyToHost(pinned_.get(), on_device_.get(), bytes);
  Await(*caller_, "the download of the result");
  std::memcpy(host_.data(), pinned_.get(), bytes);
}

void BenchBuffer::Allreduce(size_t count, DataType dtype, const AllreduceOptions& options) {
  if (!device_) {
    comm_.Allreduce(host_.data(), count, dtype, ReduceOp::kSum, options)->Wait();
    return;
  }
  staged_->Allreduce(*caller_, on_device_.get(), count, dtype, ReduceOp::kSum, options)->Wait();
}

void BenchBuffer::Drain() {
  if (device_) Await(*caller_, "the last allreduce's copy-in");
}

std::string BenchBuffer::where() const { return device_ ? device_->name() : "cpu"; }

}  // namespace cdt::cli
