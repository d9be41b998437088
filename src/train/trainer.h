// The data-parallel trainer behind `cann-dist-train train` (docs/training.md). This header is
// free of libtorch so that the CLI and tests include it cheaply; the implementation is in
// src/train/*.cc.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cdt/communicator.h"
#include "train/elastic_session.h"
#include "train/train_options.h"
#include "train/train_result.h"

namespace cdt::train {

class ClassifierModel;  // train/models.h (libtorch)
// Builds the model every rank trains: a library user's own (any ClassifierModel: images
// [B, 1, 28, 28] to [B, 10] logits), called on every rank after the same torch::manual_seed.
// Null: the built-in model `ModelOptions::name` names (MakeModel).
using ModelFactory = std::function<std::shared_ptr<ClassifierModel>(const ModelOptions&)>;

// Trains on every rank of `comm` (all ranks call it with the same options). `priority`, when
// given, is a second communicator over the same ranks that carries the gradients the next
// forward needs first (train/gradient_reducer.h). Throws cdt::Error with the rank and the cause
// on bad options, missing data or communication failures.
// With `session` (elastic runs), the run starts from the newest state every rank holds (broadcast
// from rank 0, so new members receive it), snapshots its state at every step, and carries its
// result across generations; a communication failure propagates to the caller, which re-forms the
// group and calls again.
// With `make_model`, options.model.name only labels the result.
TrainResult RunTraining(Communicator& comm, const TrainOptions& options,
                        Communicator* priority = nullptr, ElasticSession* session = nullptr,
                        const ModelFactory& make_model = nullptr);

// Writes the session's newest committed state to options.checkpoint_dir (a group paused below
// --min-workers keeps it on disk too); the file written, or "" without a state or a directory.
std::string CheckpointSession(const TrainOptions& options, ElasticSession* session,
                              const ModelFactory& make_model = nullptr);

// Loads the datasets into `session` ahead of training (hot spares wait loaded).
void LoadSessionData(const TrainOptions& options, ElasticSession* session);

}  // namespace cdt::train
