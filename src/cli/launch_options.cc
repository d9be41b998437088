#include "cli/launch_options.h"

#include <cstdio>
#include <limits>

#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "cli/open_files.h"
#include "comm/auth.h"
#include "comm/store/etcd_store.h"
#include "comm/store/tcp_store_client.h"
#include "comm/transport/node_arena.h"
#include "common/checked_number.h"
#ifdef CDT_HAVE_MPI
#include "comm/mpi/mpi_communicator.h"
#endif

namespace cdt::cli {

namespace {
// A whole integer in [lo, hi] (no sign games, no trailing text, no wrap into size_t later), or
// kInvalidArgument naming the variable and the range: the CLI exits 2 with it.
int64_t ToIntIn(const std::optional<std::string>& v, int64_t fallback, const char* name, int64_t lo,
                int64_t hi) {
  if (!v) return fallback;
  if (std::optional<int64_t> x = ParseIntegerIn(*v, lo, hi)) return *x;
  throw Error(ErrorCode::kInvalidArgument, std::string(name) + "='" + *v +
                                               "': expected a whole number from " +
                                               std::to_string(lo) + " to " + std::to_string(hi));
}
int ToInt(const std::optional<std::string>& v, int fallback, const char* name) {
  return static_cast<int>(ToIntIn(v, fallback, name, 0, std::numeric_limits<int>::max()));
}
constexpr int64_t kGiB = int64_t{1} << 30;
// "N" or, for elastic jobs, "MIN:MAX" (torchrun's spelling).
void ParseNodes(const std::string& spec, const char* name, LaunchOptions* o) {
  const auto colon = spec.find(':');
  try {
    size_t used = 0;
    if (colon == std::string::npos) {
      o->nnodes = o->min_nodes = std::stoi(spec, &used);
      if (used == spec.size()) return;
    } else {
      o->min_nodes = std::stoi(spec.substr(0, colon), &used);
      if (used == colon) {
        o->nnodes = std::stoi(spec.substr(colon + 1), &used);
        if (used == spec.size() - colon - 1) return;
      }
    }
  } catch (...) {
  }
  throw Error(ErrorCode::kInvalidArgument,
              std::string(name) + "='" + spec + "': expected N or MIN:MAX");
}
}  // namespace

void AddLaunchOptions(CLI::App* cmd, LaunchOptions* o, const Environment& env) {
  o->log = env.MakeLog();
  o->nproc_per_node = ToInt(env.nproc_per_node, 1, "CDT_NPROC_PER_NODE");
  ParseNodes(env.nnodes.value_or("1"), "CDT_NNODES", o);
  o->node_rank = ToInt(env.node_rank, 0, "CDT_NODE_RANK");
  o->rdzv_endpoint = env.rdzv_endpoint.value_or("");
  o->rdzv_backend = env.rdzv_backend.value_or("tcp");
  o->job_id = env.job_id.value_or("cdt");
  o->job_secret = env.job_secret.value_or("");
  o->node_addr = env.node_addr.value_or("");
  o->encrypt = ToIntIn(env.encrypt, 0, "CDT_ENCRYPT", 0, 1) == 1;
  o->allow_insecure = ToIntIn(env.allow_insecure, 0, "CDT_ALLOW_INSECURE", 0, 1) == 1;
  if (env.timeout) {
    try {
      o->timeout_s = std::stod(*env.timeout);
    } catch (...) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CDT_TIMEOUT='" + *env.timeout + "' is not a number");
    }
  }
  cmd->add_option("--nproc-per-node", o->nproc_per_node,
                  "workers on this node (CDT_NPROC_PER_NODE)")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
      "--nnodes", [o](const std::string& v) { ParseNodes(v, "--nnodes", o); },
      "number of nodes, or MIN:MAX for elastic jobs (nodes past MIN join as they come) "
      "(CDT_NNODES)");
  cmd->add_option("--node-rank", o->node_rank, "this node's index (CDT_NODE_RANK)")
      ->capture_default_str();
  cmd->add_option("--rdzv-endpoint", o->rdzv_endpoint,
                  "HOST:PORT of the rendezvous store on node 0 (CDT_RDZV_ENDPOINT)");
  cmd->add_option("--rdzv-backend", o->rdzv_backend, "rendezvous backend")
      ->check(CLI::IsMember({"tcp", "etcd"}))
      ->capture_default_str();
  cmd->add_option("--job-id", o->job_id, "job name, namespaces the store keys (CDT_JOB_ID)")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
      "--job-secret",
      [o](const std::string& v) {
        o->job_secret = v;
        o->secret_on_command_line = true;
      },
      "shared secret authenticating every connection of the job; prefer CDT_JOB_SECRET (a "
      "command line is visible to every user in ps); random on one node");
  cmd->add_option("--timeout", o->timeout_s,
                  "seconds a peer may stay silent before collectives fail (CDT_TIMEOUT)")
      ->capture_default_str();
  cmd->add_option("--backend", o->backend, "communication backend: tcp, mpi or auto")
      ->check(CLI::IsMember({"tcp", "mpi", "auto"}))
      ->capture_default_str();
  cmd->add_option("--node-addr", o->node_addr,
                  "address this node's workers bind and advertise (CDT_NODE_ADDR)");
  cmd->add_flag("--encrypt", o->encrypt,
                "seal every byte between ranks over TCP: AES-256-GCM or ChaCha20-Poly1305 under "
                "keys from the peer handshake; a changed byte stops the job naming the peer "
                "(CDT_ENCRYPT=1; docs/security.md)");
}

void ValidateLaunchOptions(const LaunchOptions& o) {
  if (o.nproc_per_node < 1 || o.nproc_per_node > 1024)
    throw Error(ErrorCode::kInvalidArgument,
                "--nproc-per-node (CDT_NPROC_PER_NODE) must be between 1 and 1024, not " +
                    std::to_string(o.nproc_per_node));
  if (o.nnodes < 1 || o.min_nodes < 1 || o.min_nodes > o.nnodes)
    throw Error(ErrorCode::kInvalidArgument,
                "--nnodes must be at least 1 (MIN:MAX with 1 <= MIN <= MAX)");
  if (o.min_nodes < o.nnodes && !o.elastic)
    throw Error(ErrorCode::kInvalidArgument, "--nnodes MIN:MAX needs --elastic");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw Error(ErrorCode::kInvalidArgument, "--node-rank (CDT_NODE_RANK) must be in 0.." +
                                                 std::to_string(o.nnodes - 1) + " for --nnodes " +
                                                 std::to_string(o.nnodes) + ", not " +
                                                 std::to_string(o.node_rank));
  if (!(o.timeout_s >= 1 && o.timeout_s <= 86400))
    throw Error(ErrorCode::kInvalidArgument, "--timeout must be between 1 and 86400 seconds");
}

AgentConfig ToAgentConfig(const LaunchOptions& o) {
  AgentConfig c;
  c.log = o.log;
  c.nproc_per_node = o.nproc_per_node;
  c.nnodes = o.nnodes;
  c.min_nodes = o.min_nodes;
  c.node_rank = o.node_rank;
  c.rdzv_endpoint = o.rdzv_endpoint;
  c.rdzv_backend = o.rdzv_backend;
  c.job_id = o.job_id;
  c.job_secret = o.job_secret;
  c.node_addr = o.node_addr;
  c.encrypt = o.encrypt;
  c.allow_insecure = o.allow_insecure;
  c.rdzv_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::max(60.0, o.timeout_s) * 1000));
  c.elastic = o.elastic;
  c.job_file = o.job_file;
  c.spares = o.spares;
  return c;
}

bool ShouldRunAsWorker(const Environment& env) { return env.is_worker || env.worker.has_value(); }

WorkerIdentity IdentityOf(const Environment& env) {
  return env.worker.value_or(WorkerIdentity{"single", 0, 1, 0, 1, 0});
}

WorkerSession JoinGroup(const Environment& env, const LaunchOptions& o, bool priority_channel,
                        bool training) {
  WorkerSession s;
  WorkerIdentity id = IdentityOf(env);
  bool mpi_launch = id.launcher == "mpirun" || id.launcher == "srun";
  std::string backend = o.backend;
  if (backend == "auto") {
#ifdef CDT_HAVE_MPI
    backend = mpi_launch ? "mpi" : "tcp";
#else
    backend = "tcp";
#endif
  }
  if (backend == "mpi") {
#ifdef CDT_HAVE_MPI
    s.comm = CreateMpiCommunicator();
    return s;
#else
    throw Error(ErrorCode::kInvalidArgument,
                "--backend mpi: this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
  }
  ConnectStore(env, o, &s);
  ConnectChannels(training ? TrainingCommunicatorOptions(env, o) : CommunicatorOptionsFor(env, o),
                  priority_channel, &s);
  return s;
}

CommunicatorOptions TrainingCommunicatorOptions(const Environment& env, const LaunchOptions& o) {
  CommunicatorOptions co = CommunicatorOptionsFor(env, o);
  if (!env.inline_max_bytes) co.inline_max_bytes = 0;
  return co;
}

CommunicatorOptions CommunicatorOptionsFor(const Environment& env, const LaunchOptions& o) {
  const WorkerIdentity id = IdentityOf(env);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  CommunicatorOptions co;
  co.rank = id.rank;
  co.size = id.world_size;
  co.job_id = o.job_id;
  co.secret = o.job_secret;
  co.encrypt = o.encrypt;
  co.allow_insecure = o.allow_insecure;
  co.timeout = timeout;
  co.host_id = "";  // this machine's identity: hostname + network namespace + boot id
  if (!o.node_addr.empty()) co.advertise_host = o.node_addr;
  if (env.allreduce_algo) co.default_algorithm = ParseAllreduceAlgorithm(*env.allreduce_algo);
  if (env.allreduce_rules && !env.allreduce_rules->empty())
    co.rules = std::make_shared<AllreduceRules>(AllreduceRules::Load(*env.allreduce_rules));
  if (env.autotune) co.autotune_trials = ToInt(env.autotune, 2, "CDT_AUTOTUNE");
  co.log = o.log.ForRank(id.rank);
  if (env.spin_us) co.spin = std::chrono::microseconds(ToInt(env.spin_us, 50, "CDT_SPIN_US"));
  if (env.remote_spin_us)
    co.remote_spin = std::chrono::microseconds(ToInt(env.remote_spin_us, 0, "CDT_REMOTE_SPIN_US"));
  if (env.yield_send_buffer_bytes)
    co.yield_send_buffer_bytes =
        ToInt(env.yield_send_buffer_bytes, 65536, "CDT_YIELD_SEND_BUFFER_BYTES");
  if (env.yield_send_buffer_min_bytes)
    co.yield_send_buffer_min_bytes =
        ToInt(env.yield_send_buffer_min_bytes, 0, "CDT_YIELD_SEND_BUFFER_MIN_BYTES");
  if (env.remote_recv_batch_bytes)
    co.remote_receive_batch_bytes =
        ToInt(env.remote_recv_batch_bytes, 65536, "CDT_REMOTE_RECV_BATCH_BYTES");
  if (env.socket_buffer_bytes)
    co.local_bulk_socket_buffer_bytes =
        ToInt(env.socket_buffer_bytes, 0, "CDT_SOCKET_BUFFER_BYTES");
  if (env.segment_bytes)
    co.segment_bytes =
        static_cast<size_t>(ToIntIn(env.segment_bytes, 262144, "CDT_SEGMENT_BYTES", 1, kGiB));
  if (env.inline_max_bytes)
    co.inline_max_bytes =
        static_cast<size_t>(ToIntIn(env.inline_max_bytes, 65536, "CDT_INLINE_MAX_BYTES", 0, kGiB));
  if (env.shm) co.shared_memory = ToIntIn(env.shm, 1, "CDT_SHM", 0, 1) != 0;
  if (env.shm_single_copy)
    co.shm_single_copy = ToIntIn(env.shm_single_copy, 1, "CDT_SHM_SINGLE_COPY", 0, 1) != 0;
  if (env.shm_slot_bytes)
    co.shm_slot_bytes =
        static_cast<size_t>(ToIntIn(env.shm_slot_bytes, 1 << 20, "CDT_SHM_SLOT_BYTES", 4096,
                                    static_cast<int64_t>(shm::NodeArena::kMaxSlotBytes)));
  co.check_fingerprints = env.debug && env.debug->find("collectives") != std::string::npos;
  return co;
}

void ConnectStore(const Environment& env, const LaunchOptions& o, WorkerSession* session) {
  WorkerSession& s = *session;
  const WorkerIdentity id = IdentityOf(env);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  // A store request waits as long as --timeout says, never less than the client's 30 s: at 256
  // workers starting on 2 cores a Set waited past 30 s under --timeout 180 and ended the job.
  const auto request_timeout =
      std::max<std::chrono::milliseconds>(timeout, std::chrono::seconds(30));
  CheckOpenFilesFor(
      std::max(id.world_size, env.target_world ? std::atoi(env.target_world->c_str()) : 0),
      id.rank);
  if (id.world_size == 1 && !env.store_hosted) {
    // Alone: an in-process store is all a one-rank communicator needs. It listens on loopback,
    // where any local user could connect, so it gets a secret of its own like any other store.
    const std::string secret = auth::NewSecret();
    s.hosted_store = std::make_unique<TcpStoreServer>("127.0.0.1", 0, secret);
    s.store = std::make_unique<TcpStoreClient>(s.hosted_store->address(), secret, timeout);
  } else {
    if ((!env.store_hosted || !env.store_endpoint) && (!env.master_addr || !env.master_port))
      throw Error(ErrorCode::kInvalidArgument,
                  "rank " + std::to_string(id.rank) + " (" + id.launcher +
                      "): MASTER_ADDR and MASTER_PORT must name the rendezvous store");
    net::HostPort hp = env.store_hosted && env.store_endpoint
                           ? net::ParseHostPort(*env.store_endpoint, "CDT_STORE_ENDPOINT")
                           : net::ParseHostPort(*env.master_addr + ":" + *env.master_port,
                                                "MASTER_ADDR:MASTER_PORT");
    if (o.rdzv_backend == "etcd") {
      s.store = std::make_unique<EtcdStore>(hp, timeout);
      return;
    }
    std::string secret = o.job_secret;
    if (secret.empty())
      throw Error(ErrorCode::kInvalidArgument,
                  "rank " + std::to_string(id.rank) + " (" + id.launcher +
                      "): set CDT_JOB_SECRET to the same value for every rank (it authenticates "
                      "the rendezvous store)");
    if (!env.store_hosted && id.rank == 0)
      s.hosted_store = std::make_unique<TcpStoreServer>(
          "0.0.0.0", hp.port, secret, Log(),
          TcpStoreServer::UnauthenticatedFor(2 * static_cast<size_t>(id.world_size)));
    s.store = std::make_unique<TcpStoreClient>(hp, secret, timeout, request_timeout);
  }
}

void ConnectChannels(CommunicatorOptions co, bool priority_channel, WorkerSession* session) {
  WorkerSession& s = *session;
  const bool two_channels = priority_channel && co.size > 1;
  if (two_channels) co.traffic_gate = std::make_shared<TrafficGate>();
  s.comm = ConnectTcpCommunicator(*s.store, co);
  if (two_channels) {
    co.job_id += "/priority";
    co.urgent = true;
    s.priority_comm = ConnectTcpCommunicator(*s.store, co);
  }
}

void WarnAboutSecret(const LaunchOptions& o) {
  if (o.secret_on_command_line)
    std::fprintf(stderr,
                 "cann-dist-train: warning: --job-secret is visible to every user of this machine "
                 "(ps, /proc/PID/cmdline); set CDT_JOB_SECRET instead (`export "
                 "CDT_JOB_SECRET=$(cann-dist-train secret)`). Workers get it from the "
                 "environment, not their command line.\n");
  if (!o.job_secret.empty() && o.job_secret.size() < auth::kMinSecretChars)
    std::fprintf(stderr,
                 "cann-dist-train: warning: the job secret has %zu characters; anyone who "
                 "records one handshake can guess a short secret offline. Use `cann-dist-train "
                 "secret` (256 bits).\n",
                 o.job_secret.size());
}

std::vector<std::string> WithoutSecretFlags(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {  // what follows belongs to another program
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (args[i] == "--job-secret") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--job-secret=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

int RunAsAgent(const LaunchOptions& o, int argc, char** argv) {
  WarnAboutSecret(o);
  // The workers get the secret through CDT_JOB_SECRET (RunWorkerGroup), never on their command
  // line.
  std::vector<std::string> args = WithoutSecretFlags(std::vector<std::string>(argv, argv + argc));
  args[0] = "/proc/self/exe";
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) args[0] = std::string(self, static_cast<size_t>(n));
  GroupResult r = RunWorkerGroup(ToAgentConfig(o), args, {{"CDT_WORKER", "1"}});
  if (!r.summary.empty()) std::fprintf(stderr, "cann-dist-train: %s", r.summary.c_str());
  return r.exit_code;
}

}  // namespace cdt::cli
