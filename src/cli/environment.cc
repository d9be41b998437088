#include "cli/environment.h"

#include <unistd.h>

#include <cstdlib>

#include "cdt/error.h"

namespace cdt::cli {

namespace {

std::optional<std::string> Get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int GetInt(const char* name, int fallback) {
  auto v = Get(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    int n = std::stoi(*v, &used);
    if (used == v->size()) return n;
  } catch (...) {
  }
  throw Error(ErrorCode::kInvalidArgument,
              std::string("environment variable ") + name + "='" + *v + "' is not an integer");
}

std::string AllocatorSetBy() {
  if (auto preload = Get("LD_PRELOAD"))
    for (const char* lib : {"jemalloc", "tcmalloc", "mimalloc"})
      if (preload->find(lib) != std::string::npos) return "LD_PRELOAD=" + *preload;
  if (auto tunables = Get("GLIBC_TUNABLES");
      tunables && tunables->find("glibc.malloc.") != std::string::npos)
    return "GLIBC_TUNABLES=" + *tunables;
  for (const char* name :
       {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"})
    if (auto v = Get(name)) return std::string(name) + "=" + *v;
  return "";
}

}  // namespace

Environment Environment::FromProcess() {
  Environment e;
  e.nproc_per_node = Get("CDT_NPROC_PER_NODE");
  e.nnodes = Get("CDT_NNODES");
  e.node_rank = Get("CDT_NODE_RANK");
  e.rdzv_backend = Get("CDT_RDZV_BACKEND");
  e.rdzv_endpoint = Get("CDT_RDZV_ENDPOINT");
  e.node_addr = Get("CDT_NODE_ADDR");
  e.job_id = Get("CDT_JOB_ID");
  e.carbon_url = Get("CDT_CARBON_URL");
  e.carbon_token = Get("CDT_CARBON_TOKEN");
  e.job_secret = Get("CDT_JOB_SECRET");
  e.timeout = Get("CDT_TIMEOUT");
  e.allreduce_algo = Get("CDT_ALLREDUCE_ALGO");
  e.allreduce_rules = Get("CDT_ALLREDUCE_RULES");
  e.autotune = Get("CDT_AUTOTUNE");
  e.debug = Get("CDT_DEBUG");
  e.spin_us = Get("CDT_SPIN_US");
  e.remote_spin_us = Get("CDT_REMOTE_SPIN_US");
  e.remote_recv_batch_bytes = Get("CDT_REMOTE_RECV_BATCH_BYTES");
  e.yield_send_buffer_bytes = Get("CDT_YIELD_SEND_BUFFER_BYTES");
  e.yield_send_buffer_min_bytes = Get("CDT_YIELD_SEND_BUFFER_MIN_BYTES");
  e.socket_buffer_bytes = Get("CDT_SOCKET_BUFFER_BYTES");
  e.segment_bytes = Get("CDT_SEGMENT_BYTES");
  e.inline_max_bytes = Get("CDT_INLINE_MAX_BYTES");
  e.shm = Get("CDT_SHM");
  e.shm_slot_bytes = Get("CDT_SHM_SLOT_BYTES");
  e.shm_single_copy = Get("CDT_SHM_SINGLE_COPY");
  e.encrypt = Get("CDT_ENCRYPT");
  e.allow_insecure = Get("CDT_ALLOW_INSECURE");
  e.live = Get("CDT_LIVE").value_or("1") != "0";
  e.master_addr = Get("MASTER_ADDR");
  e.master_port = Get("MASTER_PORT");
  if (auto level = Get("CDT_LOG_LEVEL")) {
    const std::optional<LogLevel> l = ParseLogLevel(*level);
    if (!l)
      throw Error(ErrorCode::kInvalidArgument, "environment variable CDT_LOG_LEVEL='" + *level +
                                                   "': use error, warning, info or debug");
    e.log_level = *l;
  }
  e.store_hosted = Get("CDT_STORE_HOSTED").value_or("") == "1";
  e.store_endpoint = Get("CDT_STORE_ENDPOINT");
  if (auto run = Get("XDG_RUNTIME_DIR"))
    e.runtime_dir = *run + "/cann-dist-train";
  else
    e.runtime_dir = "/tmp/cann-dist-train-" + std::to_string(::getuid());
  if (auto xdg = Get("XDG_CACHE_HOME"))
    e.strategy_cache_dir = *xdg + "/cann-dist-train/strategies";
  else if (auto home = Get("HOME"))
    e.strategy_cache_dir = *home + "/.cache/cann-dist-train/strategies";
  else
    e.strategy_cache_dir = "knowledge_base/strategies";
  {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    e.self_exe = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "cann-dist-train";
  }
  if (auto kb = Get("CDT_KNOWLEDGE_BASE")) {
    e.knowledge_base = *kb;
  } else {
    // The checkout's (build/bin/..), an installed prefix's (cmake --install, the wheel), the
    // system's.
    const std::string exe_dir = e.self_exe.substr(0, e.self_exe.find_last_of('/'));
    e.knowledge_base = "/usr/share/cann-dist-train/knowledge_base";
    for (const std::string& dir : {exe_dir + "/../../knowledge_base",
                                   exe_dir + "/../share/cann-dist-train/knowledge_base"}) {
      if (::access((dir + "/hardware_profiles").c_str(), R_OK) == 0) {
        e.knowledge_base = dir;
        break;
      }
    }
  }
  // $XDG_CONFIG_HOME/cann-dist-train/NAME, else ~/.config/cann-dist-train/NAME, else ./NAME.
  auto config_file = [&](const std::string& name) {
    if (auto cfg = Get("XDG_CONFIG_HOME")) return *cfg + "/cann-dist-train/" + name;
    if (auto home = Get("HOME")) return *home + "/.config/cann-dist-train/" + name;
    return name;
  };
  e.signing_key = Get("CDT_SIGNING_KEY").value_or(config_file("signing.key"));
  e.trusted_keys = config_file("trusted_keys");
  e.is_worker = Get("CDT_WORKER").value_or("") == "1";
  e.spare = Get("CDT_SPARE").value_or("") == "1";
  e.joiner = Get("CDT_JOINER").value_or("") == "1";
  e.target_world = Get("CDT_TARGET_WORLD");
  e.allocator_set_by = AllocatorSetBy();

  WorkerIdentity w;
  if (Get("RANK") && Get("WORLD_SIZE")) {
    w.launcher = e.store_hosted ? "cdt" : "torchrun";
    w.rank = GetInt("RANK", 0);
    w.world_size = GetInt("WORLD_SIZE", 1);
    w.local_rank = GetInt("LOCAL_RANK", 0);
    w.local_world_size = GetInt("LOCAL_WORLD_SIZE", 1);
    w.node_rank = GetInt("GROUP_RANK", 0);
    e.worker = w;
  } else if (Get("OMPI_COMM_WORLD_RANK")) {
    w.launcher = "mpirun";
    w.rank = GetInt("OMPI_COMM_WORLD_RANK", 0);
    w.world_size = GetInt("OMPI_COMM_WORLD_SIZE", 1);
    w.local_rank = GetInt("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    w.local_world_size = GetInt("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    w.node_rank = GetInt("OMPI_COMM_WORLD_NODE_RANK", 0);
    e.worker = w;
  } else if (Get("SLURM_PROCID") && Get("SLURM_NTASKS")) {
    w.launcher = "srun";
    w.rank = GetInt("SLURM_PROCID", 0);
    w.world_size = GetInt("SLURM_NTASKS", 1);
    w.local_rank = GetInt("SLURM_LOCALID", 0);
    w.local_world_size = GetInt("SLURM_NTASKS_PER_NODE", 1);
    w.node_rank = GetInt("SLURM_NODEID", 0);
    e.worker = w;
  }
  if (e.worker &&
      (e.worker->world_size < 1 || e.worker->rank < 0 ||
       (e.worker->rank >= e.worker->world_size && !e.spare && !e.joiner)))  // ids past the world
    throw Error(ErrorCode::kInvalidArgument,
                "launcher " + e.worker->launcher + " gave rank " + std::to_string(e.worker->rank) +
                    " outside world size " + std::to_string(e.worker->world_size));
  return e;
}

}  // namespace cdt::cli
