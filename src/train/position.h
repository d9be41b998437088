// Where training stands (free of libtorch): checkpoints, elastic snapshots and the data component
// share it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cdt::train {

// The next step, its epoch, and the global sample position in it.
struct Position {
  int64_t step = 0;
  uint64_t epoch = 0;
  size_t pos = 0;
  int64_t global_batch = 0;  // of the run that wrote it (0 = not recorded: older checkpoints)
};

}  // namespace cdt::train
