// The trainer's checkpoint files (libtorch; include only from src/train .cc files). Formats:
// docs/training.md ("Checkpoints") and docs/compression.md (per-rank compression state).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "elastic/checkpoint_store.h"
#include "elastic/health_monitor.h"
#include "train/position.h"
#include "train/train_options.h"
#include "train/train_result.h"

namespace cdt::train {

// Everything needed to continue exactly: model, optimizer, position, RNG. Every rank holds the
// same state; rank 0 writes it. `floats` (optional) receives where the parameters, SGD momenta and
// AdamW first moments lie in the bytes (for --checkpoint-quantize; AdamW's second moments are
// left out: a quantisation error could make them negative).
// `seed`: the run's --seed, recorded so that a resume with another one is refused.
std::string CaptureState(torch::nn::Module& model, torch::optim::Optimizer& opt, const Position& p,
                         uint64_t seed, std::vector<elastic::FloatSpan>* floats = nullptr);
// Throws cdt::Error(kProtocol) naming `source` if the bytes do not fit this model and optimizer,
// (kInvalidArgument) if they were written with another --seed.
Position RestoreState(const std::string& bytes, torch::nn::Module& model,
                      torch::optim::Optimizer& opt, uint64_t seed, const std::string& source);

// The state of the newest valid checkpoint in `dir` (elastic/checkpoint_store.h; falling back
// past corrupt ones, each reported on stderr when `log`), else a checkpoint.pt written by an
// older version; empty when there is none. `source` receives the file read, `step` its step (-1:
// none; kLegacyStep: a checkpoint.pt, whose step is inside the archive).
constexpr int64_t kLegacyStep = -2;
std::string NewestCheckpoint(const std::string& dir, const Log* log, std::string* source,
                             int64_t* step, const FileSystem& fs = LocalFileSystem());

// Before any rank loads a checkpoint, the ranks agree on it: its step and the CRC-32 of the state
// it holds (elastic::StateCrc; 0 without one). Ranks that see different directories (node-local
// disks) or different files — of different steps, or of the same step of different runs — would
// otherwise train on from different states and diverge. Throws cdt::Error(kInvalidArgument) on
// every rank, naming each rank's step, CRC and file, when they differ. A collective: every rank
// calls it.
void AgreeOnResumeState(Communicator& comm, int64_t step, uint32_t state_crc,
                        const std::string& source, const std::string& dir);

// When the trainer checkpoints and what it cost: every --checkpoint-every steps, or at the
// Young/Daly interval sqrt(2 C MTBF) with C measured (the training thread's part: snapshot and
// waiting for the previous write) when --checkpoint-mtbf is set. Rank 0 writes, on the
// writer's background thread.
class CheckpointSchedule {
 public:
  // `writer`: this rank writes (rank 0).
  CheckpointSchedule(const CheckpointOptions& o, bool writer, const Log& log);
  // Whether to checkpoint after `step`. Every rank agrees with --checkpoint-every; in MTBF mode
  // only the writer checkpoints (the others have nothing to write: MTBF mode refuses
  // compression, whose per-rank state every rank writes).
  bool Due(int64_t step) const;
  // Snapshot (`capture`) and hand to the writer (nothing on other ranks). In MTBF mode the next
  // checkpoint is due one Young/Daly interval of wall time later: counted in time, not in steps
  // estimated from the mean step so far, which a slow first step (warm-up on a loaded machine)
  // inflated into an early extra checkpoint.
  // `capture` fills the float spans it is given (CaptureState's `floats`).
  void Take(int64_t next_step,
            const std::function<std::string(std::vector<elastic::FloatSpan>*)>& capture);
  // Waits for the last write; fills r->checkpoints and r->checkpoint.
  void Finish(TrainResult* r);

  // Health (elastic/health_monitor.h): feeds this rank's predictor with the step's time, its
  // resident memory and the host's TCP retransmissions (every --health-interval); true when a rule
  // fired (logged with the rank). A warning on any rank makes every rank call RequestNow (the
  // trainer sums the flags with the step's loss): the next Due is true, with a checkpoint dir.
  bool ObserveHealth(double step_s, int64_t step, int rank);
  void RequestNow() { requested_ = !o_.dir.empty(); }
  int health_checkpoints() const { return health_checkpoints_; }

 private:
  const CheckpointOptions o_;
  const Log log_;
  bool writer_rank_;
  std::unique_ptr<elastic::CheckpointWriter> writer_;
  double capture_s_ = 0;
  bool requested_ = false;
  int health_checkpoints_ = 0;
  elastic::FailurePredictor predictor_;
  double health_t_ = -1, health_step_s_ = 0;
  int health_steps_ = 0;
  // MTBF mode: the first checkpoint, after step 0, measures C; the next is due at due_at_.
  bool measured_ = false;
  std::chrono::steady_clock::time_point due_at_{};
};

std::string CheckpointPath(const std::string& dir);  // checkpoint.pt (older versions)
// Creates the file's directory, then cdt::WriteFileAtomically (common/file_io.h) with mode 0600:
// checkpoints and state files are readable by their owner only.
void WriteStateFile(const std::string& path, const std::string& bytes,
                    const FileSystem& fs = LocalFileSystem());
// A checkpoint file that must be there (cdt::Error naming it otherwise).
std::string ReadFile(const std::string& path, const FileSystem& fs = LocalFileSystem());

// Compression state is per rank (each rank's error-feedback residual differs): one file per
// rank beside the checkpoint, with the world size, the bucket layout (elements per bucket) and
// the `--compress` choice it was written for.
std::string CompressionStatePath(const std::string& dir, int rank);
// The file's bytes: a torch archive inside the checksummed envelope of elastic/state_file.h, which
// records `step`, the step of the model checkpoint it belongs to. `adaptive`: the adaptive
// controller's state (CompressionSteering::State), empty otherwise.
std::string CaptureCompressionState(int64_t step, const std::vector<std::vector<float>>& states,
                                    int world, const std::vector<size_t>& bucket_elements,
                                    const std::string& compress,
                                    const std::vector<double>& adaptive = {});
// Empty, with the reason in `why_not`, when the file is missing, damaged (its checksum), of
// another step than the model checkpoint resumed (`step`), or written for another world size,
// bucket layout or --compress (files without a layout or a compressor, from before they were
// recorded, count as another): it never throws, so that one rank's bad file cannot end that rank
// alone while the others wait for it. Each compressor's own state (PowerSGD's Q, random-k's call
// number) means nothing to another. `adaptive` (optional) receives the adaptive controller's
// state, empty where the file has none (another --compress, or an older version).
std::vector<std::vector<float>> RestoreCompressionState(const std::string& path, int64_t step,
                                                        const std::vector<size_t>& bucket_elements,
                                                        int world, const std::string& compress,
                                                        std::string* why_not,
                                                        std::vector<double>* adaptive = nullptr);

}  // namespace cdt::train
