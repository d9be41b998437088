#include "elastic/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
#include "common/unix_time.h"
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
  const std::string cannot_execute = "cann-dist-train: cannot execute '" + argv[0] + "': ";
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
    // In the forked child of a threaded process only async-signal-safe calls are sound: write(2)
    // the line made before the fork, not the Log.
    const char* why = std::strerror(errno);
    const ssize_t ignored[] = {::write(STDERR_FILENO, cannot_execute.data(), cannot_execute.size()),
                               ::write(STDERR_FILENO, why, std::strlen(why)),
                               ::write(STDERR_FILENO, "\n", 1)};
    (void)ignored;
    ::_exit(127);
  }
  return pid;
}

}  // namespace

namespace {

// Where this node's agent meets the others: the store's address, the job's name in it and the
// secret the job's connections prove.
struct Rendezvous {
  bool etcd = false;
  std::string job, secret;
  net::HostPort addr;
};

Rendezvous ResolveRendezvous(const AgentConfig& c) {
  Rendezvous r;
  r.etcd = c.rdzv_backend == "etcd";
  if (!r.etcd && c.rdzv_backend != "tcp")
    throw Error(ErrorCode::kInvalidArgument,
                "--rdzv-backend '" + c.rdzv_backend + "': use tcp or etcd");
  // etcd keeps keys across runs: a job on one node gets its own namespace per run; on several
  // nodes every agent must agree, so the --job-id must be new (checked in AgreeOnPlacement).
  r.job = c.job_id;
  if (r.etcd && c.nnodes == 1) r.job += "/run-" + Hex(auth::RandomBytes(6));
  r.secret = c.job_secret;
  if (r.secret.empty() && c.nnodes > 1 && !r.etcd)
    throw Error(ErrorCode::kInvalidArgument,
                "a job on several nodes needs a shared secret: run `export CDT_JOB_SECRET=$("
                "cann-dist-train secret)` once and give every node that value");
  // One node: a fresh secret nobody else knows. Several nodes on etcd with none given: there is no
  // secret they share, so the peer handshake is keyed by the generation token in etcd alone
  // (docs/security.md says to give one).
  if (r.secret.empty() && c.nnodes == 1) r.secret = auth::NewSecret();
  std::string endpoint = c.rdzv_endpoint;
  if (endpoint.empty() && r.etcd)
    throw Error(ErrorCode::kInvalidArgument,
                "--rdzv-backend etcd needs --rdzv-endpoint HOST:PORT (etcd's client URL, "
                "e.g. 127.0.0.1:2379)");
  if (endpoint.empty()) {
    if (c.nnodes > 1)
      throw Error(ErrorCode::kInvalidArgument,
                  "a job on several nodes needs --rdzv-endpoint HOST:PORT (node 0's address)");
    endpoint = "127.0.0.1:0";
  }
  r.addr = net::ParseHostPort(endpoint, "--rdzv-endpoint");
  return r;
}

// Blocks the signals the agent supervises for as long as it lives. Made before any thread exists,
// so that the store's thread inherits the mask and the signals reach sigtimedwait.
class SupervisedSignals {
 public:
  SupervisedSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGCHLD);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &set_, &original_);
  }
  ~SupervisedSignals() { ::pthread_sigmask(SIG_SETMASK, &original_, nullptr); }
  SupervisedSignals(const SupervisedSignals&) = delete;
  SupervisedSignals& operator=(const SupervisedSignals&) = delete;
  const sigset_t& set() const { return set_; }
  const sigset_t& original() const { return original_; }

 private:
  sigset_t set_, original_;
};

// Which worker ids this node runs and how large the job is.
struct Placement {
  int base = 0;         // this node's first worker id
  int world = 0;        // the first generation's workers
  int target = 0;       // the most workers the job takes
  int min_nodes = 0;    // the nodes of the first generation
  bool joiner = false;  // this node joins a running job
};

Placement AgreeOnPlacement(const AgentConfig& c, const Rendezvous& r, Store& store,
                           const std::string& prefix) {
  if (r.etcd && c.node_rank == 0 && store.Check(prefix + "node/0/nproc"))
    throw Error(ErrorCode::kInvalidArgument,
                "etcd at " + r.addr.ToString() + " already holds job '" + r.job +
                    "' from an earlier run: give this run a new --job-id");
  store.Set(prefix + "node/" + std::to_string(c.node_rank) + "/nproc",
            std::to_string(c.nproc_per_node));
  Placement p;
  p.min_nodes = c.min_nodes > 0 ? c.min_nodes : c.nnodes;
  if (c.elastic && p.min_nodes < c.nnodes) {
    // Nodes come and go: no waiting for the others; ids by node rank.
    p.base = c.node_rank * c.nproc_per_node;
    p.world = p.min_nodes * c.nproc_per_node;
    p.target = c.nnodes * c.nproc_per_node;
  } else {
    for (int n = 0; n < c.nnodes; ++n) {
      int k = std::stoi(store.Get(prefix + "node/" + std::to_string(n) + "/nproc", c.rdzv_timeout));
      if (n < c.node_rank) p.base += k;
      p.world += k;
    }
    p.target = p.world;
  }
  p.joiner = c.node_rank >= p.min_nodes;
  return p;
}

// The job file carries the secret: a directory only we may write, a file only we may read,
// written atomically; a planted file or link there is refused before any worker starts. Removed
// when the agent ends.
class JobFile {
 public:
  JobFile(const AgentConfig& c, const Rendezvous& r) {
    if (c.node_rank != 0 || c.job_file.empty()) return;
    EnsurePrivateDirectory(std::filesystem::path(c.job_file).parent_path().string());
    CheckPrivateFile(c.job_file);
    WriteFileAtomically(
        c.job_file,
        c.rdzv_backend + "\n" + r.addr.ToString() + "\n" + r.job + "\n" + r.secret + "\n", 0600);
    path_ = c.job_file;
  }
  ~JobFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  JobFile(const JobFile&) = delete;
  JobFile& operator=(const JobFile&) = delete;

 private:
  std::string path_;
};

// torch's own store, for scripts that use torch.distributed without cann_dist (its env://
// rendezvous): global rank 0 hosts a TCPStore at MASTER_ADDR:MASTER_PORT, as it does with no
// launcher at all, and the other ranks dial it; the launcher's store is at CDT_STORE_ENDPOINT.
// Node 0's agent, beside rank 0, picks a port free there and publishes where; the others read it.
net::HostPort AgreeOnTorchMaster(const AgentConfig& c, const Rendezvous& r, Store& store,
                                 const std::string& prefix) {
  const std::string key = prefix + "torch_master";
  if (c.node_rank != 0) return net::ParseHostPort(store.Get(key, c.rdzv_timeout), key);
  net::HostPort master;
  if (!c.node_addr.empty())
    master.host = c.node_addr;
  else if (!r.etcd)
    master.host = r.addr.host;  // node 0 serves the launcher's store there
  else
    master.host = c.nnodes == 1 ? "127.0.0.1" : net::LocalAddressToward(r.addr);
  // torch's TCPStore listens on every interface: the port must be free there. The probe closes at
  // once (a listener leaves no TIME_WAIT) and rank 0 binds the port when it starts.
  net::HostPort bound;
  net::Listen("0.0.0.0", 0, &bound);
  master.port = bound.port;
  store.Set(key, master.ToString());
  return master;
}

// The variables every worker of this node gets (torchrun's, and ours: DESIGN.md §4).
std::map<std::string, std::string> WorkerEnvironment(const AgentConfig& c, const Rendezvous& r,
                                                     const Placement& p,
                                                     const net::HostPort& torch_master,
                                                     std::map<std::string, std::string> env) {
  env["WORLD_SIZE"] = std::to_string(p.world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(c.nproc_per_node);
  env["GROUP_RANK"] = std::to_string(c.node_rank);
  env["MASTER_ADDR"] = torch_master.host;
  env["MASTER_PORT"] = std::to_string(torch_master.port);
  env["CDT_STORE_ENDPOINT"] = r.addr.ToString();
  env["CDT_JOB_ID"] = r.job;
  env["CDT_JOB_SECRET"] = r.secret;
  env["CDT_STORE_HOSTED"] = "1";
  env["CDT_RDZV_BACKEND"] = c.rdzv_backend;
  env["CDT_TARGET_WORLD"] = std::to_string(p.target);
  if (p.joiner) env["CDT_JOINER"] = "1";
  env["CDT_NNODES"] = std::to_string(c.nnodes);
  env["CDT_NODE_RANK"] = std::to_string(c.node_rank);
  if (!c.node_addr.empty()) env["CDT_NODE_ADDR"] = c.node_addr;
  if (c.encrypt) env["CDT_ENCRYPT"] = "1";
  if (c.allow_insecure) env["CDT_ALLOW_INSECURE"] = "1";
  return env;
}

// The node's workers (and spares) from start to exit: forwards signals, reports the dead of an
// elastic job gone, stops the rest after the first failure of a static one, and ends what still
// runs once an elastic job has finished.
class Supervisor {
 public:
  Supervisor(const AgentConfig& c, const Placement& p, Store& store, std::string job,
             const SupervisedSignals& signals)
      : c_(c), p_(p), store_(store), job_(std::move(job)), signals_(signals) {}
  ~Supervisor() { StopAll(SIGKILL); }  // nothing runs past the agent's return, even on a throw
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  void Start(const std::vector<std::string>& argv, std::map<std::string, std::string> env) {
    for (int l = 0; l < c_.nproc_per_node; ++l) {
      env["RANK"] = std::to_string(p_.base + l);
      env["LOCAL_RANK"] = std::to_string(l);
      Add(argv, env, l);
    }
    for (int s = 0; c_.elastic && s < c_.spares; ++s) {
      env["RANK"] = std::to_string(p_.target + c_.node_rank * c_.spares + s);
      env["LOCAL_RANK"] = std::to_string(c_.nproc_per_node + s);
      env["CDT_SPARE"] = "1";
      Add(argv, env, c_.nproc_per_node + s);
    }
  }

  // Until every worker has exited.
  GroupResult Run() {
    while (running_ > 0) {
      timespec tick{0, 100 * 1000 * 1000};  // SIGCHLD wakes us at once; the tick paces the rest
      siginfo_t info;
      const int sig = ::sigtimedwait(&signals_.set(), &info, &tick);
      if (sig == SIGINT || sig == SIGTERM) Forward(sig);
      Reap();
      if (c_.elastic && !finished_ && running_ > 0) LookForTheEnd();
      if (kill_at_ && Clock::now() >= *kill_at_) {
        StopAll(SIGKILL, /*spare_finishers=*/finished_);
        kill_at_ = Clock::now() + std::chrono::hours(24);
      }
    }
    // The last workers may all exit between two looks at the store: the job still finished, and
    // the workers lost on the way (already reported) do not make it fail.
    if (c_.elastic && !finished_) {
      try {
        if (elastic::IsFinished(store_, job_)) result_.exit_code = 0;
      } catch (const Error&) {
      }
    }
    return result_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Child {
    pid_t pid;
    int local_rank;
    bool running;
    bool finishing = false;  // elastic: a member of the generation that finished the job
  };

  void Add(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
           int local_rank) {
    children_.push_back(
        {Spawn(argv, BuildEnvironment(env), signals_.original(), !c_.elastic), local_rank, true});
    ++running_;
  }

  // `spare_finishers`: leave the members of the finished generation alone (they may still save
  // the model, evaluate, write results: their time, as under torchrun).
  void StopAll(int sig, bool spare_finishers = false) {
    for (auto& ch : children_)
      if (ch.running && !(spare_finishers && ch.finishing)) ::kill(ch.pid, sig);
  }

  int WorkerIdOf(int local_rank) const {
    return local_rank < c_.nproc_per_node
               ? p_.base + local_rank
               : p_.target + c_.node_rank * c_.spares + (local_rank - c_.nproc_per_node);
  }

  void Forward(int sig) {
    c_.log.Info("cann-dist-train agent (node {}): got signal {}, forwarding to workers",
                c_.node_rank, sig);
    StopAll(sig);
    if (!kill_at_) kill_at_ = Clock::now() + c_.stop_grace;
    if (result_.exit_code == 0) result_.exit_code = 128 + sig;
  }

  void Reap() {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (auto& ch : children_) {
        if (ch.pid != pid || !ch.running) continue;
        ch.running = false;
        --running_;
        const int id = WorkerIdOf(ch.local_rank);
        WorkerExit ex{ch.local_rank, id, pid, 0, ""};
        ex.how = DescribeStatus(status, &ex.exit_code);
        result_.exits.push_back(ex);
        if (ex.exit_code != 0 && c_.elastic && !finished_)
          ReportGone(ex);
        else if (ex.exit_code != 0 && !kill_at_ && !c_.elastic)
          StopAfterFirstFailure(ex);
      }
    }
  }

  // Elastic: the others re-form the group without it; tell them it is gone, so that their
  // rendezvous round need not wait for it.
  void ReportGone(const WorkerExit& ex) {
    c_.log.Warning("cann-dist-train agent (node {}): worker {} (pid {}) {}; {}", c_.node_rank,
                   ex.global_rank, ex.pid, ex.how,
                   p_.target + c_.spares * c_.nnodes > 1
                       ? "the others re-form the group without it"
                       : "it was the job's only worker, so the job ends");
    try {
      elastic::ReportGone(store_, job_, ex.global_rank, ex.how);
    } catch (const Error& e) {
      c_.log.Error("cann-dist-train agent (node {}): cannot report worker {} gone: {}",
                   c_.node_rank, ex.global_rank, e.what());
    }
    if (result_.exit_code == 0) result_.exit_code = ex.exit_code;
    result_.summary += "worker " + std::to_string(ex.global_rank) + " (pid " +
                       std::to_string(ex.pid) + ") " + ex.how + "\n";
  }

  // Static: the first failure ends the job (SIGTERM to the others, SIGKILL after the grace).
  void StopAfterFirstFailure(const WorkerExit& ex) {
    result_.exit_code = ex.exit_code;
    result_.summary += "rank " + std::to_string(ex.global_rank) + " (local rank " +
                       std::to_string(ex.local_rank) + ", pid " + std::to_string(ex.pid) + ") " +
                       ex.how + "; stopping the other workers of node " +
                       std::to_string(c_.node_rank) + "\n";
    StopAll(SIGTERM);
    kill_at_ = Clock::now() + c_.stop_grace;
  }

  // Elastic: once the job's last generation has finished, what still runs and is not one of its
  // members is hung or was left out of it (or a spare never needed): stopped after stop_grace.
  void LookForTheEnd() {
    std::vector<int> members;
    try {
      const int64_t g = elastic::FinishedGeneration(store_, job_);
      finished_ = g >= 0;
      if (finished_) members = elastic::MembersOf(store_, job_, g, kStoreLook);
    } catch (const Error&) {  // the store gone or the keys unreadable: stop them all
    }
    if (!finished_) return;
    for (Child& ch : children_)
      ch.finishing =
          std::find(members.begin(), members.end(), WorkerIdOf(ch.local_rank)) != members.end();
    result_.exit_code = 0;
    kill_at_ = Clock::now() + c_.stop_grace;
  }
  static constexpr std::chrono::milliseconds kStoreLook{1000};

  const AgentConfig& c_;
  const Placement p_;
  Store& store_;
  const std::string job_;
  const SupervisedSignals& signals_;
  std::vector<Child> children_;
  size_t running_ = 0;
  bool finished_ = false;  // elastic: the job's last generation finished
  std::optional<Clock::time_point> kill_at_;
  GroupResult result_;
};

// Node 0 keeps the store up until every node's workers are done with it.
void AnnounceDone(const AgentConfig& c, const Placement& p, Store& store, const std::string& prefix,
                  bool hosts_store, int exit_code) {
  try {
    store.Set(prefix + "node/" + std::to_string(c.node_rank) + "/done", std::to_string(exit_code));
    if (!hosts_store) return;
    std::vector<std::string> keys;
    for (int n = 0; n < c.nnodes; ++n)  // nodes past MIN that never came are not waited for
      if (n < p.min_nodes || store.Check(prefix + "node/" + std::to_string(n) + "/nproc"))
        keys.push_back(prefix + "node/" + std::to_string(n) + "/done");
    store.Wait(keys, exit_code == 0 ? c.rdzv_timeout : std::chrono::milliseconds(5000));
    elastic::LingerForWatcher(store, c.job_id, UnixSeconds(), std::chrono::milliseconds(3000));
  } catch (const Error& e) {
    c.log.Error("cann-dist-train agent (node {}): {}", c.node_rank, e.what());
  }
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
  Rendezvous r = ResolveRendezvous(c);
  const SupervisedSignals signals;

  std::unique_ptr<TcpStoreServer> server;
  if (c.node_rank == 0 && !r.etcd) {
    const std::string bind = c.nnodes > 1 ? "0.0.0.0" : r.addr.host;
    // Every worker and spare may connect at once, two connections each (elastic workers hold
    // one for the engine and one for torch), and an agent per node.
    const size_t workers = static_cast<size_t>(c.nnodes) *
                           static_cast<size_t>(c.nproc_per_node + std::max(0, c.spares));
    server = std::make_unique<TcpStoreServer>(
        bind, r.addr.port, r.secret, c.log,
        TcpStoreServer::UnauthenticatedFor(2 * workers + static_cast<size_t>(c.nnodes)));
    r.addr.port = server->address().port;
  }
  std::unique_ptr<Store> store;
  if (r.etcd)
    store = std::make_unique<EtcdStore>(r.addr, c.rdzv_timeout);
  else
    store = std::make_unique<TcpStoreClient>(r.addr, r.secret, c.rdzv_timeout);
  const std::string prefix = r.job + "/agent/";
  const Placement placement = AgreeOnPlacement(c, r, *store, prefix);
  const net::HostPort torch_master = AgreeOnTorchMaster(c, r, *store, prefix);
  const JobFile job_file(c, r);

  GroupResult result;
  {
    Supervisor workers(c, placement, *store, r.job, signals);
    workers.Start(argv, WorkerEnvironment(c, r, placement, torch_master, extra_env));
    result = workers.Run();
  }
  AnnounceDone(c, placement, *store, prefix, server != nullptr, result.exit_code);
  return result;
}

}  // namespace cdt
