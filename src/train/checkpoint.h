// The trainer's checkpoint files (libtorch; include only from src/train .cc files). Formats:
// docs/training.md ("Checkpoints") and docs/compression.md (per-rank compression state).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace cdt::train {

// Where training stands: the next step, its epoch, and the global sample position in it.
struct Position {
  int64_t step = 0;
  uint64_t epoch = 0;
  size_t pos = 0;
};

// Everything needed to continue exactly: model, optimizer, position, RNG. Every rank holds the
// same state; rank 0 writes it.
std::string CaptureState(torch::nn::Module& model, torch::optim::Optimizer& opt, const Position& p,
                         const TrainOptions& o);
// Throws cdt::Error(kProtocol) naming `source` if the bytes do not fit this model and optimizer,
// (kInvalidArgument) if they were written with another --seed.
Position RestoreState(const std::string& bytes, torch::nn::Module& model, torch::optim::Optimizer& opt,
                      const TrainOptions& o, const std::string& source);

std::string CheckpointPath(const std::string& dir);
// Temp file, then rename: a crash mid-write leaves the previous file intact.
void WriteFileAtomically(const std::string& path, const std::string& bytes);
std::string ReadFile(const std::string& path);

// Compression state is per rank (each rank's error-feedback residual differs): one file per
// rank beside the checkpoint, with the world size it was written for.
std::string CompressionStatePath(const std::string& dir, int rank);
std::string CaptureCompressionState(const std::vector<std::vector<float>>& states, int world);
// Empty when the file is missing or was written for another world size.
std::vector<std::vector<float>> RestoreCompressionState(const std::string& path, size_t buckets, int world);

}  // namespace cdt::train
