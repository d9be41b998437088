// cann_dist.elastic.run's engine half: the elastic driver (elastic/driver.h) with a Python
// training as its state. Each generation's communicator becomes a ProcessGroupCDT that the
// Python side installs as torch.distributed's default group (init_process_group("cdt") over the
// job's store, python/engine_store.h), then runs the user's train_fn in it.
//
// The Python object `driven` (python/cann_dist/elastic.py, _Driven) answers the driver:
//   train(generation: dict) -> int     sync, then train_fn(state); the dict holds generation,
//                                      rank, world, workers, worker_id, process_group, store,
//                                      before_step(step) -> bool
//   restore(failure: dict), forget(), checkpoint() -> str, current_step() -> int,
//   mean_step_s() -> float, and regroup_exception (the type commit() raises to regroup).
// A Python exception out of train() ends the generation as a recoverable failure when a
// collective of the generation's group failed (a peer lost, timed out): the driver re-forms the
// group and calls train() again. Any other exception is the user's: it ends the job and reaches
// the caller of run() unchanged.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "cdt/tcp_communicator.h"
#include "elastic/driver.h"

namespace cdt::python {

// What the launcher's environment says (read by the Python side: cann_dist/elastic.py).
struct ElasticRunConfig : elastic::WorkerLaunch {
  std::string rdzv_backend = "tcp";  // tcp (the agent's store) | etcd
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string secret;                   // CDT_JOB_SECRET
  std::string node_addr = "127.0.0.1";  // CDT_NODE_ADDR
  bool encrypt = false;                 // CDT_ENCRYPT=1
  bool allow_insecure = false;          // CDT_ALLOW_INSECURE=1
  std::string log_level = "info";       // CDT_LOG_LEVEL
  // As the "cdt" backend reads them (cann_dist/__init__.py): CDT_SHM, CDT_SHM_SINGLE_COPY,
  // CDT_INLINE_MAX_BYTES.
  bool shared_memory = CommunicatorOptions{}.shared_memory;
  bool shm_single_copy = CommunicatorOptions{}.shm_single_copy;
  size_t inline_max_bytes = CommunicatorOptions{}.inline_max_bytes;
};

// Runs until the job finishes; returns the exit code of the last train(). Call with the GIL held
// (it is released while the driver waits).
int RunElasticFromPython(const ElasticRunConfig& config, pybind11::object driven);

}  // namespace cdt::python
