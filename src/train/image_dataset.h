// Image classification data in memory: Fashion-MNIST from its idx files (gzip or plain), or a
// synthetic set for benchmarks. Framework-free; the trainer wraps batches into tensors.
//
// idx format (LeCun): big-endian u32 magic 0x00000803 (u8 images, 3 dims) or 0x00000801 (u8
// labels, 1 dim), then one big-endian u32 per dimension, then the bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cdt::train {

struct ImageDataset {
  int64_t count = 0;
  int64_t rows = 0, cols = 0;
  int64_t classes = 10;
  std::vector<uint8_t> pixels;  // count x rows x cols
  std::vector<uint8_t> labels;  // count
};

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Reads an images file and a labels file (".gz" or not). Errors name the file and what is wrong
// (kIo for unreadable files, kProtocol for malformed ones).
ImageDataset LoadIdx(const std::string& images_path, const std::string& labels_path);
// The same from the files' (uncompressed) bytes; the paths only name them in errors.
ImageDataset ParseIdx(const std::vector<uint8_t>& images, const std::vector<uint8_t>& labels,
                      const std::string& images_path, const std::string& labels_path);

// train = true: the 60,000 training images, else the 10,000 test images. A missing directory or
// file is kIo naming the Debian package to install.
ImageDataset LoadFashionMnist(const std::string& dir, bool train);

// `count` 28x28 images of 10 classes: each class is a fixed random pattern plus per-sample noise,
// so models can learn it (accuracy says the pipeline works, nothing about Fashion-MNIST).
ImageDataset SyntheticImages(int64_t count, uint64_t seed);

}  // namespace cdt::train
