// The checkpoint.pt of older versions (train/checkpoint.h): libtorch's zip reader does not check
// its entries' CRC-32s, so NewestCheckpoint does, and a damaged file is refused instead of loading
// a model with a flipped bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cdt/error.h"
#include "train/checkpoint.h"

namespace cdt::train {
namespace {

TEST(TrainCheckpoint, AnOlderVersionsCheckpointPtIsReadOnlyWhenItsZipChecksumsHold) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("cdt-legacy-ckpt-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  torch::serialize::OutputArchive archive;
  archive.write("weights", torch::arange(100000, torch::kFloat32));
  std::ostringstream out;
  archive.save_to(out);
  std::string bytes = out.str();
  std::ofstream(CheckpointPath(dir), std::ios::binary) << bytes;
  std::string source;
  int64_t step = 0;
  EXPECT_EQ(NewestCheckpoint(dir, nullptr, &source, &step), bytes);
  EXPECT_EQ(step, kLegacyStep);
  EXPECT_EQ(source, CheckpointPath(dir));
  bytes[bytes.size() / 2] ^= 1;  // inside the tensor's data
  std::ofstream(CheckpointPath(dir), std::ios::binary | std::ios::trunc) << bytes;
  try {
    NewestCheckpoint(dir, nullptr, &source, &step);
    FAIL() << "a damaged checkpoint.pt was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fails its CRC-32"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cdt::train
