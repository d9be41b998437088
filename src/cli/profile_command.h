// `cann-dist-train profile` (docs/predict.md, "Model profiles"): measures a model on this machine
// for the simulator — one-rank `train` runs per thread count and batch size (forward, backward,
// optimizer and the rest of a step), a short two-rank run for the gradient buckets as a
// multi-rank job lays them out (and which go on the priority connection), then `bench compress`
// on a gradient of the model's size (what each compressor costs and saves) — and writes the
// model profile.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/environment.h"

namespace cdt::cli {

struct ProfileOptions {
  std::string model = "cnn";
  std::string batch_sizes = "16,32,64";
  std::string threads;  // "" = 1 .. the CPUs this process may use
  int steps = 40;
  int repeats = 3;
  std::string compressors = "fp16,int8,powersgd,topk";  // "none" = skip
  std::string json;                                     // "" = <model>-profile.json
  std::vector<std::string> train_args;  // after --: more train options (--dataset, --width, ...)
};

void AddProfileCommand(CLI::App& app, ProfileOptions* o);
int RunProfile(const ProfileOptions& o, const Environment& env);

}  // namespace cdt::cli
