// The launch options every multi-process verb takes (DESIGN.md §4), their CDT_* defaults, and the
// two halves of a verb: the agent (spawn workers) and the worker (join the group).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cdt/communicator.h"
#include "cdt/store.h"
#include "cdt/tcp_communicator.h"
#include "cli/environment.h"
#include "comm/store/tcp_store_server.h"
#include "elastic/worker_group.h"

namespace cdt::cli {

struct LaunchOptions {
  Log log;  // CDT_LOG_LEVEL's (the agent's and the communicators' lines)
  int nproc_per_node = 1;
  int nnodes = 1;     // MAX of --nnodes MIN:MAX
  int min_nodes = 1;  // MIN (= nnodes unless MIN:MAX)
  int node_rank = 0;
  std::string rdzv_endpoint;
  std::string rdzv_backend = "tcp";
  std::string job_id = "cdt";
  std::string job_secret;
  bool secret_on_command_line = false;  // given with --job-secret, which `ps` shows
  double timeout_s = 30;
  std::string backend = "auto";  // tcp | mpi | auto (mpi under mpirun/srun when built with MPI)
  std::string node_addr;
  bool encrypt = false;         // --encrypt / CDT_ENCRYPT=1: sealed frames between ranks
  bool allow_insecure = false;  // CDT_ALLOW_INSECURE=1: no secret beyond loopback, loudly
  bool elastic = false;         // set by the verb (`train --elastic`, `elastic`): the agent's mode
  int spares = 0;               // elastic: hot spares per node
  std::string job_file;         // node 0's agent leaves the store's address here (fault-inject)
};

// Warns (stderr) about a secret given on the command line, or one short enough to guess offline.
void WarnAboutSecret(const LaunchOptions& o);
// argv without `--job-secret VALUE` / `--job-secret=VALUE` (before any `--`): what workers get.
std::vector<std::string> WithoutSecretFlags(const std::vector<std::string>& args);

// Registers the options on `cmd`, with defaults taken from `env`.
void AddLaunchOptions(CLI::App* cmd, LaunchOptions* o, const Environment& env);
// Validates values CLI11 cannot (ranges, backend names); throws cdt::Error naming the flag.
void ValidateLaunchOptions(const LaunchOptions& o);

AgentConfig ToAgentConfig(const LaunchOptions& o);

// Whether this process should act as a worker (started by an agent, mpirun, srun or torchrun)
// rather than spawn workers itself.
bool ShouldRunAsWorker(const Environment& env);

// A worker's membership: the store it rendezvoused through and its communicator.
struct WorkerSession {
  std::unique_ptr<TcpStoreServer> hosted_store;  // rank 0 hosts the store when no agent does
  std::unique_ptr<Store> store;
  std::unique_ptr<Communicator> comm;
  // A second TCP communicator over the same ranks (own connections and thread) for traffic that
  // must not queue behind bulk transfers; null unless asked for, alone, or on MPI.
  std::unique_ptr<Communicator> priority_comm;
};

// Joins the group described by the environment (see environment.h), with the TCP or MPI backend;
// `priority_channel` also connects WorkerSession::priority_comm; `training`: its communicators'
// options are TrainingCommunicatorOptions.
WorkerSession JoinGroup(const Environment& env, const LaunchOptions& o,
                        bool priority_channel = false, bool training = false);

// JoinGroup in parts, for workers that build several groups over one store (elastic training):
// who launched us, the store, the options of this worker's communicator (rank and size from the
// launcher; the caller may change them), and the channels (replacing any in `session`).
WorkerIdentity IdentityOf(const Environment& env);
void ConnectStore(const Environment& env, const LaunchOptions& o, WorkerSession* session);
CommunicatorOptions CommunicatorOptionsFor(const Environment& env, const LaunchOptions& o);
// For a trainer, whose collectives overlap with compute: CommunicatorOptionsFor, but none runs on
// the calling thread (inline_max_bytes 0) unless CDT_INLINE_MAX_BYTES is set. Run there, the
// cnn's small buckets held its backward up: 4 workers 2,586 -> 2,277 samples/s, backward 8.8 ->
// 12.9 s (docs/benchmarks.md, "Small collectives on the caller's thread").
CommunicatorOptions TrainingCommunicatorOptions(const Environment& env, const LaunchOptions& o);
void ConnectChannels(CommunicatorOptions co, bool priority_channel, WorkerSession* session);

// Runs this same program (same argv) as the workers of this node, with CDT_WORKER=1; returns the
// process exit code and prints failures.
int RunAsAgent(const LaunchOptions& o, int argc, char** argv);

}  // namespace cdt::cli
