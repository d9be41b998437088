#include "train/image_dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "cdt/error.h"

namespace cdt::train {

namespace {

// An idx file larger than this (uncompressed) is refused: a gzip "bomb" would otherwise take the
// memory it claims. Fashion-MNIST's training images are 47 MB.
constexpr size_t kMaxIdxBytes = size_t{4} << 30;

// Whole file through zlib's gz reader, which also reads files that are not compressed.
std::vector<uint8_t> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(ErrorCode::kIo, "cannot open '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (;;) {
    if (out.size() > kMaxIdxBytes) {
      gzclose(f);
      throw Error(ErrorCode::kProtocol, "'" + path + "' holds more than " +
                                            std::to_string(kMaxIdxBytes >> 30) +
                                            " GiB (uncompressed); this loader reads up to that");
    }
    const int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(f, &code);
      gzclose(f);
      throw Error(ErrorCode::kProtocol, "'" + path + "' is not a readable gzip file: " + why);
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  gzclose(f);
  return out;
}

uint32_t BigEndian32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t{b[at]} << 24 | uint32_t{b[at + 1]} << 16 | uint32_t{b[at + 2]} << 8 | b[at + 3];
}

// Checks the header and returns the dimensions; the payload starts at 4 + 4 * dims.
std::vector<uint32_t> IdxDims(const std::vector<uint8_t>& b, uint32_t magic,
                              const std::string& path) {
  const size_t want_dims = magic & 0xff;
  if (b.size() < 4 + 4 * want_dims)
    throw Error(ErrorCode::kProtocol,
                "'" + path + "': truncated idx header (" + std::to_string(b.size()) + " bytes)");
  if (BigEndian32(b, 0) != magic) {
    char got[16];
    std::snprintf(got, sizeof got, "0x%08x", BigEndian32(b, 0));
    char need[16];
    std::snprintf(need, sizeof need, "0x%08x", magic);
    throw Error(ErrorCode::kProtocol, "'" + path + "': idx magic " + got + ", expected " + need +
                                          (want_dims == 3 ? " (u8 images)" : " (u8 labels)"));
  }
  std::vector<uint32_t> dims;
  size_t payload = 1;
  for (size_t i = 0; i < want_dims; ++i) {
    dims.push_back(BigEndian32(b, 4 + 4 * i));
    // Three u32 dimensions can multiply past 64 bits, and a product that wraps around could match
    // the file's size while naming far more samples than it holds.
    if (__builtin_mul_overflow(payload, size_t{dims.back()}, &payload))
      throw Error(ErrorCode::kProtocol, "'" + path + "': idx dimensions overflow (dimension " +
                                            std::to_string(i) + " is " +
                                            std::to_string(dims.back()) + ")");
  }
  if (want_dims == 3 && (dims[1] == 0 || dims[2] == 0))
    throw Error(ErrorCode::kProtocol, "'" + path + "': images of " + std::to_string(dims[1]) +
                                          " x " + std::to_string(dims[2]) + " pixels");
  if (b.size() != 4 + 4 * want_dims + payload)
    throw Error(ErrorCode::kProtocol, "'" + path + "': header promises " + std::to_string(payload) +
                                          " bytes of data, the file holds " +
                                          std::to_string(b.size() - 4 - 4 * want_dims));
  return dims;
}

}  // namespace

ImageDataset LoadIdx(const std::string& images_path, const std::string& labels_path) {
  return ParseIdx(ReadMaybeGzip(images_path), ReadMaybeGzip(labels_path), images_path, labels_path);
}

ImageDataset ParseIdx(const std::vector<uint8_t>& img, const std::vector<uint8_t>& lab,
                      const std::string& images_path, const std::string& labels_path) {
  std::vector<uint32_t> di = IdxDims(img, 0x00000803, images_path);
  std::vector<uint32_t> dl = IdxDims(lab, 0x00000801, labels_path);
  if (di[0] != dl[0])
    throw Error(ErrorCode::kProtocol, "'" + images_path + "' has " + std::to_string(di[0]) +
                                          " images but '" + labels_path + "' has " +
                                          std::to_string(dl[0]) + " labels");
  ImageDataset d;
  d.count = di[0];
  d.rows = di[1];
  d.cols = di[2];
  d.pixels.assign(img.begin() + 16, img.end());
  d.labels.assign(lab.begin() + 8, lab.end());
  for (size_t i = 0; i < d.labels.size(); ++i)
    if (d.labels[i] >= d.classes)
      throw Error(ErrorCode::kProtocol, "'" + labels_path + "': label " +
                                            std::to_string(d.labels[i]) + " of sample " +
                                            std::to_string(i) + " is not a class 0..9");
  return d;
}

ImageDataset LoadFashionMnist(const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  auto find = [&](const std::string& stem) {
    for (const char* suffix : {".gz", ""}) {
      std::string p = dir + "/" + stem + suffix;
      if (std::filesystem::exists(p)) return p;
    }
    throw Error(ErrorCode::kIo, "Fashion-MNIST: no '" + stem + "[.gz]' in '" + dir +
                                    "'; install the Debian package dataset-fashion-mnist "
                                    "(apt-get install dataset-fashion-mnist) or pass --data-dir");
  };
  return LoadIdx(find(prefix + "-images-idx3-ubyte"), find(prefix + "-labels-idx1-ubyte"));
}

ImageDataset SyntheticImages(int64_t count, uint64_t seed) {
  ImageDataset d;
  d.count = count;
  d.rows = d.cols = 28;
  const int64_t pixels = d.rows * d.cols;
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint8_t>> pattern(static_cast<size_t>(d.classes));
  for (auto& p : pattern) {
    p.resize(static_cast<size_t>(pixels));
    for (auto& x : p) x = static_cast<uint8_t>(rng() % 256);
  }
  d.pixels.resize(static_cast<size_t>(count * pixels));
  d.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int c = static_cast<int>(rng() % static_cast<uint64_t>(d.classes));
    d.labels[static_cast<size_t>(i)] = static_cast<uint8_t>(c);
    for (int64_t j = 0; j < pixels; ++j) {
      const int noisy = pattern[static_cast<size_t>(c)][static_cast<size_t>(j)] +
                        static_cast<int>(rng() % 97) - 48;
      d.pixels[static_cast<size_t>(i * pixels + j)] =
          static_cast<uint8_t>(std::clamp(noisy, 0, 255));
    }
  }
  return d;
}

}  // namespace cdt::train
