// Everything cann-dist-train reads from the process environment, read once at start-up
// (the only place in the project that calls getenv; STYLE.md principle 3).
//
// Worker identity comes from the first launcher found:
//   our agent / torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//   Open MPI (mpirun)      OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   Slurm (srun)           SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE
#pragma once

#include <optional>
#include <string>

#include "cdt/log.h"

namespace cdt::cli {

struct WorkerIdentity {
  std::string launcher;  // "cdt", "torchrun", "mpirun", "srun"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
};

struct Environment {
  // Launch defaults (DESIGN.md §4).
  std::optional<std::string> nproc_per_node, nnodes, node_rank, rdzv_endpoint, rdzv_backend,
      node_addr;
  std::optional<std::string> job_id, job_secret, timeout, allreduce_algo, allreduce_rules, debug;
  // CDT_AUTOTUNE: timed calls per candidate for online autotuning (0 = off).
  std::optional<std::string> autotune;
  std::optional<std::string> master_addr, master_port;
  // `green --carbon-provider`: CDT_CARBON_URL (the provider's base URL; the public API when unset)
  // and CDT_CARBON_TOKEN (green/carbon_provider.h, docs/green.md "Live providers").
  std::optional<std::string> carbon_url, carbon_token;
  // Transport tuning knobs: CDT_SPIN_US, CDT_REMOTE_SPIN_US, CDT_REMOTE_RECV_BATCH_BYTES,
  // CDT_SOCKET_BUFFER_BYTES (bulk channel, same-host peers), CDT_YIELD_SEND_BUFFER_BYTES (the
  // bulk communicator's sockets beside a priority one) and CDT_YIELD_SEND_BUFFER_MIN_BYTES (its
  // floor toward other hosts, where it follows the path), CDT_SEGMENT_BYTES, CDT_INLINE_MAX_BYTES
  // (collectives up to this size run on the caller's thread; 0 = never).
  std::optional<std::string> spin_us, remote_spin_us, remote_recv_batch_bytes,
      yield_send_buffer_bytes, yield_send_buffer_min_bytes, inline_max_bytes;
  std::optional<std::string> socket_buffer_bytes, segment_bytes;
  // CDT_SHM=0: same-node ranks talk over TCP only; CDT_SHM_SLOT_BYTES: the shared-memory slot
  // size (comm/node_arena_setup.h).
  std::optional<std::string> shm, shm_slot_bytes, shm_single_copy;
  // CDT_ENCRYPT=1: seal every byte between ranks (--encrypt); CDT_ALLOW_INSECURE=1: let a job
  // without a secret listen beyond loopback (docs/security.md).
  std::optional<std::string> encrypt, allow_insecure;
  // CDT_LIVE=0: workers publish no live metrics for the dashboard (cli/live_publisher.h).
  bool live = true;
  // Default strategy cache: $XDG_CACHE_HOME/cann-dist-train/strategies, else
  // $HOME/.cache/cann-dist-train/strategies, else knowledge_base/strategies.
  std::string strategy_cache_dir;
  // Where agents leave a job's rendezvous address and secret for `fault-inject` (mode 0600):
  // $XDG_RUNTIME_DIR/cann-dist-train, else /tmp/cann-dist-train-<uid>.
  std::string runtime_dir;
  // CDT_KNOWLEDGE_BASE, else <binary>/../../knowledge_base (a build tree), else
  // <binary>/../share/cann-dist-train/knowledge_base (an installed prefix, the wheel), else
  // /usr/share/cann-dist-train/knowledge_base: hardware profiles, carbon traces and tables.
  std::string knowledge_base;
  // The signing key of `cert issue` / `green --certify`: CDT_SIGNING_KEY, else
  // $XDG_CONFIG_HOME or $HOME/.config /cann-dist-train/signing.key.
  std::string signing_key;
  // Signers `cert verify` trusts: $XDG_CONFIG_HOME or $HOME/.config /cann-dist-train/trusted_keys.
  std::string trusted_keys;
  std::string self_exe;  // /proc/self/exe: verbs that run other verbs start this binary
  // CDT_STORE_HOSTED=1: our agent runs the rendezvous store, at CDT_STORE_ENDPOINT (host:port);
  // MASTER_ADDR:MASTER_PORT is then where rank 0 hosts torch's own TCPStore.
  bool store_hosted = false;
  std::optional<std::string> store_endpoint;
  bool is_worker = false;  // CDT_WORKER=1: started by our agent to run a verb's worker side
  bool spare = false;      // CDT_SPARE=1: an elastic job's hot spare (docs/elastic.md)
  bool joiner = false;     // CDT_JOINER=1: a worker of a node past MIN of --nnodes MIN:MAX
  std::optional<std::string>
      target_world;                      // CDT_TARGET_WORLD: the most workers an elastic job takes
  std::optional<WorkerIdentity> worker;  // set when any launcher's variables are present
  // Who already governs malloc, in words ("" = nobody: glibc's defaults): another allocator in
  // LD_PRELOAD (jemalloc, tcmalloc, mimalloc), or the user's glibc settings (GLIBC_TUNABLES'
  // glibc.malloc.*, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_,
  // MALLOC_MMAP_MAX_). `train` then leaves the allocator alone (common/heap_retention.h).
  std::string allocator_set_by;
  // CDT_LOG_LEVEL: error, warning, info (the default) or debug — what every component's Log
  // writes to stderr (cdt/log.h).
  LogLevel log_level = LogLevel::kInfo;
  Log MakeLog() const { return Log(log_level); }

  static Environment FromProcess();
};

}  // namespace cdt::cli
