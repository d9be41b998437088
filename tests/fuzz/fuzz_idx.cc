// The IDX loader (train/image_dataset.h) on an images file and a labels file, split at the first
// NUL byte of the input... which IDX headers are full of, so the split is at the byte the first
// input byte points to instead.
#include "cdt/error.h"
#include "fuzz_util.h"
#include "train/image_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t split = 1 + static_cast<size_t>(data[0]) * (size - 1) / 256;
  const std::vector<uint8_t> images(data + 1, data + split), labels(data + split, data + size);
  try {
    const cdt::train::ImageDataset d = cdt::train::ParseIdx(images, labels, "images", "labels");
    if (d.pixels.size() != static_cast<size_t>(d.count) * d.rows * d.cols ||
        d.labels.size() != static_cast<size_t>(d.count))
      __builtin_trap();  // accepted, but not what it says it is
  } catch (const cdt::Error&) {
  }
  return 0;
}
