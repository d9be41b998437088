#include "elastic/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "cdt/error.h"
#include "comm/auth.h"
#include "comm/store/etcd_store.h"
#include "comm/store/tcp_store_client.h"
#include "comm/store/tcp_store_server.h"
#include "common/die_with_parent.h"
#include "common/file_io.h"
#include "elastic/rendezvous.h"

extern char** environ;

namespace cdt {

namespace {

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string DescribeStatus(int status, int* code) {
  if (WIFEXITED(status)) {
    *code = WEXITSTATUS(status);
    return "exited with status " + std::to_string(*code);
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    *code = 128 + sig;
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  *code = 1;
  return "ended with wait status " + std::to_string(status);
}

// Builds "KEY=VALUE" strings: this process's environment with `overrides` applied.
std::vector<std::string> BuildEnvironment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    if (!overrides.count(key)) env.push_back(kv);
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

// `with_agent`: the kernel kills the worker when the agent goes (see RunWorkerGroup's header).
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const sigset_t& original_mask, bool with_agent) {
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t agent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw Error(ErrorCode::kIo, std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Killed with -9, the agent forwards nothing: an orphaned worker would go on holding its
    // rank's ports, memory and accelerator with no one to stop it. RunWorkerGroup forks from the
    // thread that waits for the workers.
    if (with_agent) DieWithParent(agent);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    ::pthread_sigmask(SIG_SETMASK, &original_mask, nullptr);
    ::execvpe(args[0], args.data(), envp.data());
    std::fprintf(stderr, "cann-dist-train: cannot execute '%s': %s\n", args[0],
                 std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

}  // namespace

GroupResult RunWorkerGroup(const AgentConfig& c, const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& extra_env) {
  if (argv.empty()) throw Error(ErrorCode::kInvalidArgument, "no worker command given");
  if (c.nproc_per_node < 1)
    throw Error(ErrorCode::kInvalidArgument, "--nproc-per-node must be at least 1");
  if (c.nnodes < 1 || c.node_rank < 0 || c.node_rank >= c.nnodes)
    throw Error(ErrorCode::kInvalidArgument, "--node-rank " + std::to_string(c.node_rank) +
                                                 " is outside 0.." + std::to_string(c.nnodes - 1));
  const bool etcd = c.rdzv_backend == "etcd";
  if (!etcd && c.rdzv_backend != "tcp")
    throw Error(ErrorCode::kInvalidArgument,
                "--rdzv-backend '" + c.rdzv_backend + "': use tcp or etcd");
  // etcd keeps keys across runs: a job on one node gets its own namespace per run; on several
  // nodes every agent must agree, so the --job-id must be new (checked below).
  std::string job = c.job_id;
  if (etcd && c.nnodes == 1) job += "/run-" + Hex(auth::RandomBytes(6));
  std::string secret = c.job_secret;
  if (secret.empty() && c.nnodes > 1 && !etcd)
    throw Error(ErrorCode::kInvalidArgument,
                "a job on several nodes needs a shared secret: run `export CDT_JOB_SECRET=$("
                "cann-dist-train secret)` once and give every node that value");
  // One node: a fresh secret nobody else knows. Several nodes on etcd with none given: there is no
  // secret they share, so the peer handshake is keyed by the generation token in etcd alone
  // (docs/security.md says to give one).
  if (secret.empty() && c.nnodes == 1) secret = auth::NewSecret();
  std::string endpoint = c.rdzv_endpoint;
  if (endpoint.empty() && etcd)
    throw Error(ErrorCode::kInvalidArgument,
                "--rdzv-backend etcd needs --rdzv-endpoint HOST:PORT (etcd's client URL, "
                "e.g. 127.0.0.1:2379)");
  if (endpoint.empty()) {
    if (c.nnodes > 1)
      throw Error(ErrorCode::kInvalidArgument,
                  "a job on several nodes needs --rdzv-endpoint HOST:PORT (node 0's address)");
    endpoint = "127.0.0.1:0";
  }
  net::HostPort rdzv = net::ParseHostPort(endpoint, "--rdzv-endpoint");

  // Block the signals we supervise before any thread exists, so the store thread inherits the mask
  // and they are delivered to sigtimedwait below.
  sigset_t supervised, original;
  sigemptyset(&supervised);
  sigaddset(&supervised, SIGCHLD);
  sigaddset(&supervised, SIGINT);
  sigaddset(&supervised, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &supervised, &original);
  struct MaskRestorer {
    sigset_t mask;
    ~MaskRestorer() { ::pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{original};

  std::unique_ptr<TcpStoreServer> server;
  if (c.node_rank == 0 && !etcd) {
    std::string bind = c.nnodes > 1 ? "0.0.0.0" : rdzv.host;
    server = std::make_unique<TcpStoreServer>(bind, rdzv.port, secret);
    rdzv.port = server->address().port;
  }
  std::unique_ptr<Store> store_owner;
  if (etcd)
    store_owner = std::make_unique<EtcdStore>(rdzv, c.rdzv_timeout);
  else
    store_owner = std::make_unique<TcpStoreClient>(rdzv, secret, c.rdzv_timeout);
  Store& store = *store_owner;
  const std::string prefix = job + "/agent/";
  if (etcd && c.node_rank == 0 && store.Check(prefix + "node/0/nproc"))
    throw Error(ErrorCode::kInvalidArgument,
                "etcd at " + rdzv.ToString() + " already holds job '" + job +
                    "' from an earlier run: give this run a new --job-id");
  store.Set(prefix + "node/" + std::to_string(c.node_rank) + "/nproc",
            std::to_string(c.nproc_per_node));
  int base = 0, world = 0, target = 0;
  const int min_nodes = c.min_nodes > 0 ? c.min_nodes : c.nnodes;
  if (c.elastic && min_nodes < c.nnodes) {
    // Nodes come and go: no waiting for the others; ids by node rank.
    base = c.node_rank * c.nproc_per_node;
    world = min_nodes * c.nproc_per_node;
    target = c.nnodes * c.nproc_per_node;
  } else {
    for (int n = 0; n < c.nnodes; ++n) {
      int k = std::stoi(store.Get(prefix + "node/" + std::to_string(n) + "/nproc", c.rdzv_timeout));
      if (n < c.node_rank) base += k;
      world += k;
    }
    target = world;
  }
  const bool joiner = c.node_rank >= min_nodes;  // joins a running job

  // The job file carries the secret: a directory only we may write, a file only we may read,
  // written atomically; a planted file or link there is refused before any worker starts.
  struct JobFile {
    std::string path;
    ~JobFile() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  } job_file;
  if (c.node_rank == 0 && !c.job_file.empty()) {
    EnsurePrivateDirectory(std::filesystem::path(c.job_file).parent_path().string());
    CheckPrivateFile(c.job_file);
    WriteFileAtomically(c.job_file,
                        c.rdzv_backend + "\n" + rdzv.ToString() + "\n" + job + "\n" + secret + "\n",
                        0600);
    job_file.path = c.job_file;
  }

  std::map<std::string, std::string> env = extra_env;
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(c.nproc_per_node);
  env["GROUP_RANK"] = std::to_string(c.node_rank);
  env["MASTER_ADDR"] = rdzv.host;
  env["MASTER_PORT"] = std::to_string(rdzv.port);
  env["CDT_JOB_ID"] = job;
  env["CDT_JOB_SECRET"] = secret;
  env["CDT_STORE_HOSTED"] = "1";
  env["CDT_RDZV_BACKEND"] = c.rdzv_backend;
  env["CDT_TARGET_WORLD"] = std::to_string(target);
  if (joiner) env["CDT_JOINER"] = "1";
  env["CDT_NNODES"] = std::to_string(c.nnodes);
  env["CDT_NODE_RANK"] = std::to_string(c.node_rank);
  if (!c.node_addr.empty()) env["CDT_NODE_ADDR"] = c.node_addr;

  struct Child {
    pid_t pid;
    int local_rank;
    bool running;
  };
  std::vector<Child> children;
  GroupResult result;
  auto stop_all = [&](int sig) {
    for (auto& ch : children)
      if (ch.running) ::kill(ch.pid, sig);
  };
  try {
    for (int l = 0; l < c.nproc_per_node; ++l) {
      env["RANK"] = std::to_string(base + l);
      env["LOCAL_RANK"] = std::to_string(l);
      children.push_back({Spawn(argv, BuildEnvironment(env), original, !c.elastic), l, true});
    }
    for (int s = 0; c.elastic && s < c.spares; ++s) {
      env["RANK"] = std::to_string(target + c.node_rank * c.spares + s);
      env["LOCAL_RANK"] = std::to_string(c.nproc_per_node + s);
      env["CDT_SPARE"] = "1";
      children.push_back(
          {Spawn(argv, BuildEnvironment(env), original, !c.elastic), c.nproc_per_node + s, true});
    }
  } catch (...) {
    stop_all(SIGKILL);
    throw;
  }

  std::optional<std::chrono::steady_clock::time_point> kill_at;
  size_t running = children.size();
  bool finished = false;  // elastic: the job's last generation finished
  while (running > 0) {
    timespec tick{
        0, 100 * 1000 * 1000};  // SIGCHLD wakes us at once; the tick paces the finished check
    siginfo_t info;
    int sig = ::sigtimedwait(&supervised, &info, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      std::fprintf(stderr,
                   "cann-dist-train agent (node %d): got signal %d, forwarding to workers\n",
                   c.node_rank, sig);
      stop_all(sig);
      if (!kill_at) kill_at = std::chrono::steady_clock::now() + c.stop_grace;
      if (result.exit_code == 0) result.exit_code = 128 + sig;
    }
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (auto& ch : children) {
        if (ch.pid != pid || !ch.running) continue;
        ch.running = false;
        --running;
        const int id = ch.local_rank < c.nproc_per_node
                           ? base + ch.local_rank
                           : target + c.node_rank * c.spares + (ch.local_rank - c.nproc_per_node);
        WorkerExit ex{ch.local_rank, id, pid, 0, ""};
        ex.how = DescribeStatus(status, &ex.exit_code);
        result.exits.push_back(ex);
        if (ex.exit_code != 0 && c.elastic && !finished) {
          // The others re-form the group without it: tell them it is gone, so that their
          // rendezvous round need not wait for it.
          std::fprintf(stderr, "cann-dist-train agent (node %d): worker %d (pid %d) %s; %s\n",
                       c.node_rank, ex.global_rank, static_cast<int>(pid), ex.how.c_str(),
                       target + c.spares * c.nnodes > 1
                           ? "the others re-form the group without it"
                           : "it was the job's only worker, so the job ends");
          try {
            elastic::ReportGone(store, job, ex.global_rank, ex.how);
          } catch (const Error& e) {
            std::fprintf(stderr,
                         "cann-dist-train agent (node %d): cannot report worker %d gone: %s\n",
                         c.node_rank, ex.global_rank, e.what());
          }
          if (result.exit_code == 0) result.exit_code = ex.exit_code;
          result.summary += "worker " + std::to_string(ex.global_rank) + " (pid " +
                            std::to_string(pid) + ") " + ex.how + "\n";
        } else if (ex.exit_code != 0 && !kill_at && !c.elastic) {
          // First failure: stop the others (SIGTERM, then SIGKILL after the grace period).
          result.exit_code = ex.exit_code;
          result.summary += "rank " + std::to_string(ex.global_rank) + " (local rank " +
                            std::to_string(ex.local_rank) + ", pid " + std::to_string(pid) + ") " +
                            ex.how + "; stopping the other workers of node " +
                            std::to_string(c.node_rank) + "\n";
          stop_all(SIGTERM);
          kill_at = std::chrono::steady_clock::now() + c.stop_grace;
        }
      }
    }
    if (c.elastic && !finished && running > 0) {
      try {
        finished = elastic::IsFinished(store, job);
      } catch (const Error&) {
      }
      if (finished) {
        // What still runs is hung or was left out of the last generation.
        result.exit_code = 0;
        kill_at = std::chrono::steady_clock::now() + c.stop_grace;
      }
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      stop_all(SIGKILL);
      kill_at = std::chrono::steady_clock::now() + std::chrono::hours(24);
    }
  }

  // The last workers may all exit between two looks at the store: the job still finished, and
  // the workers lost on the way (already reported) do not make it fail.
  if (c.elastic && !finished) {
    try {
      if (elastic::IsFinished(store, job)) result.exit_code = 0;
    } catch (const Error&) {
    }
  }

  // Node 0 keeps the store up until every node's workers are done with it.
  try {
    store.Set(prefix + "node/" + std::to_string(c.node_rank) + "/done",
              std::to_string(result.exit_code));
    if (server) {
      std::vector<std::string> keys;
      for (int n = 0; n < c.nnodes; ++n)  // nodes past MIN that never came are not waited for
        if (n < min_nodes || store.Check(prefix + "node/" + std::to_string(n) + "/nproc"))
          keys.push_back(prefix + "node/" + std::to_string(n) + "/done");
      store.Wait(keys, result.exit_code == 0 ? c.rdzv_timeout : std::chrono::milliseconds(5000));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "cann-dist-train agent (node %d): %s\n", c.node_rank, e.what());
  }
  return result;
}

}  // namespace cdt
