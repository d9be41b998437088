// Rendezvous at scale: N lightweight members (threads, one store connection each, no training)
// run the elastic rendezvous (elastic/rendezvous.h) against the real TCP store — hosted by a
// child process, as a node-0 agent hosts it — or a real etcd server, and time two rounds:
//   1. generation 0: all N members start together (connect, then JoinRound);
//   2. churn: `--churn K` members leave (their agents report them gone) while K spares, announced
//      and waiting (WaitForRound), join: generation 1 closes back at N (target_world = N).
// Each round's membership is checked: one rank per member, every member agreeing on the order,
// survivors in their previous order, then spares by worker id. The store's CPU seconds and peak
// RSS (its process, /proc) are reported beside the times. The torch TCPStore ratio is
// bench/rendezvous_torch.py.
// Usage: rendezvous_scale [--members N] [--churn K] [--store tcp|etcd] [--json FILE]
//                         [--unauthenticated-cap N]  (the TCP store's admission cap, for A/B
//                         runs; default: as a launcher sizes it, UnauthenticatedFor)
// Exits 77 (skipped) for --store etcd where etcd is not installed. ctest runs it small
// (bench.rendezvous_scale.*: 128 members, 32 leaving) so that it keeps working.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cdt/error.h"
#include "comm/store/etcd_store.h"
#include "comm/store/tcp_store_client.h"
#include "comm/store/tcp_store_server.h"
#include "common/die_with_parent.h"
#include "elastic/rendezvous.h"
#include "etcd_server.h"

namespace {

using Clock = std::chrono::steady_clock;
using cdt::elastic::Membership;

struct Options {
  int members = 1024;
  int churn = 256;
  std::string store = "tcp";
  std::string json;
  size_t unauthenticated = 0;  // the TCP store's admission cap; 0 = as a launcher sizes it
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--members")
      o.members = std::stoi(value());
    else if (a == "--churn")
      o.churn = std::stoi(value());
    else if (a == "--store")
      o.store = value();
    else if (a == "--json")
      o.json = value();
    else if (a == "--unauthenticated-cap")
      o.unauthenticated = std::stoul(value());
    else
      throw std::runtime_error("unknown argument " + a +
                               " (usage: rendezvous_scale [--members N] [--churn K] "
                               "[--store tcp|etcd] [--unauthenticated-cap N] [--json FILE])");
  }
  if (o.members < 2 || o.churn < 0 || o.churn >= o.members)
    throw std::runtime_error("--members must be >= 2 and 0 <= --churn < --members");
  if (o.store != "tcp" && o.store != "etcd")
    throw std::runtime_error("--store is tcp or etcd, not " + o.store);
  return o;
}

// Counts the requests each member makes, by kind, around its real store connection.
struct Requests {
  std::atomic<int64_t> set{0}, get{0}, wait{0}, add{0}, compare_set{0}, check{0};
  std::string Text() const {
    return "set " + std::to_string(set) + ", get " + std::to_string(get) + ", wait " +
           std::to_string(wait) + ", add " + std::to_string(add) + ", compare-set " +
           std::to_string(compare_set) + ", check " + std::to_string(check);
  }
  int64_t Total() const { return set + get + wait + add + compare_set + check; }
};

class CountedStore : public cdt::Store {
 public:
  // Counts into per_round[*round].
  CountedStore(std::unique_ptr<cdt::Store> inner, Requests* per_round,
               const std::atomic<int>* round)
      : inner_(std::move(inner)), per_round_(per_round), round_(round) {}
  void Set(const std::string& k, const std::string& v) override {
    ++N()->set;
    inner_->Set(k, v);
  }
  std::string Get(const std::string& k, std::chrono::milliseconds t) override {
    ++N()->get;
    return inner_->Get(k, t);
  }
  void Wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    ++N()->wait;
    inner_->Wait(k, t);
  }
  int64_t Add(const std::string& k, int64_t d) override {
    ++N()->add;
    return inner_->Add(k, d);
  }
  std::string CompareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    ++N()->compare_set;
    return inner_->CompareSet(k, e, d);
  }
  bool Delete(const std::string& k) override { return inner_->Delete(k); }
  bool Check(const std::string& k) override {
    ++N()->check;
    return inner_->Check(k);
  }

 private:
  Requests* N() { return &per_round_[round_->load()]; }
  std::unique_ptr<cdt::Store> inner_;
  Requests* per_round_;
  const std::atomic<int>* round_;
};

// The store's process as /proc shows it: CPU seconds (user + system) and peak RSS.
struct ProcessUse {
  double cpu_s = 0;
  double peak_rss_mib = 0;
};

ProcessUse UseOf(pid_t pid) {
  ProcessUse u;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string f;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) u.cpu_s += std::stod(f) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    if (i == 15) u.cpu_s += std::stod(f) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) u.peak_rss_mib = std::stod(line.substr(6)) / 1024.0;
  return u;
}

// The TCP store in a child process (forked before any thread starts), admitting `cap`
// unauthenticated connections at once.
// Rejected() stops it and returns the connections it dropped or refused.
class StoreProcess {
 public:
  StoreProcess(const std::string& secret, size_t cap) {
    int up[2];
    if (::pipe(up) != 0) throw std::runtime_error("pipe failed");
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(up[0]);
      cdt::DieWithParent(parent);
      sigset_t term;  // blocked before the server's thread starts, so that only sigwait takes it
      sigemptyset(&term);
      sigaddset(&term, SIGTERM);
      ::pthread_sigmask(SIG_BLOCK, &term, nullptr);
      cdt::TcpStoreServer server("127.0.0.1", 0, secret, cdt::Log(), cap);
      const uint16_t port = server.address().port;
      if (::write(up[1], &port, sizeof port) != sizeof port) ::_exit(1);
      int sig = 0;
      ::sigwait(&term, &sig);
      const uint64_t rejected = server.rejected_connections();
      if (::write(up[1], &rejected, sizeof rejected) != sizeof rejected) ::_exit(1);
      ::_exit(0);
    }
    ::close(up[1]);
    from_ = up[0];
    if (::read(from_, &port_, sizeof port_) != sizeof port_)
      throw std::runtime_error("the store process did not start");
  }
  ~StoreProcess() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    ::close(from_);
  }
  uint64_t Rejected() {
    uint64_t n = 0;
    ::kill(pid_, SIGTERM);
    if (::read(from_, &n, sizeof n) != sizeof n) throw std::runtime_error("the store process died");
    return n;
  }
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  int from_ = -1;
};

// Runs `body(i)` on `n` threads at once and returns the seconds until the last one finished.
// The first exception a thread throws is rethrown here, after every thread has finished.
double RunTogether(int n, const std::function<void(int)>& body) {
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (first) std::rethrow_exception(first);
  return s;
}

// Every member must hold the same member list, with its own id at its rank.
void CheckAgreement(const std::vector<Membership>& got, const std::vector<int>& expected,
                    const char* round) {
  for (const Membership& m : got) {
    if (m.workers != expected)
      throw std::runtime_error(std::string(round) + ": a member saw a different member list");
    if (m.rank < 0 ||
        expected[static_cast<size_t>(m.rank)] != m.workers[static_cast<size_t>(m.rank)])
      throw std::runtime_error(std::string(round) + ": a member holds no rank");
  }
}

struct Round {
  std::string name;
  int members = 0;
  double seconds = 0;
  double store_cpu_s = 0;
  const Requests* requests = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = Parse(argc, argv);
    if (o.store == "etcd" && !cdt::testing::EtcdServer::available()) {
      std::fprintf(stderr,
                   "rendezvous_scale: --store etcd needs /usr/bin/etcd (Debian "
                   "etcd-server); skipped\n");
      return 77;  // ctest's skip
    }
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;  // one connection per member, and the server's side of each
    ::setrlimit(RLIMIT_NOFILE, &lim);
    const std::string secret = "rendezvous-scale";
    std::unique_ptr<StoreProcess> tcp;
    std::unique_ptr<cdt::testing::EtcdServer> etcd;
    pid_t store_pid = -1;
    std::function<std::unique_ptr<cdt::Store>()> open;
    Requests requests[2];
    std::atomic<int> round_now{0};  // which of `requests` the members count into
    auto connect = [&] { return std::make_unique<CountedStore>(open(), requests, &round_now); };
    if (o.store == "tcp") {
      tcp = std::make_unique<StoreProcess>(
          secret, o.unauthenticated > 0 ? o.unauthenticated
                                        : cdt::TcpStoreServer::UnauthenticatedFor(
                                              static_cast<size_t>(o.members + o.churn)));
      store_pid = tcp->pid();
      const cdt::net::HostPort at{"127.0.0.1", tcp->port()};
      open = [at, secret] {
        return std::make_unique<cdt::TcpStoreClient>(at, secret, std::chrono::seconds(60),
                                                     std::chrono::seconds(60));
      };
    } else {
      etcd = std::make_unique<cdt::testing::EtcdServer>();
      store_pid = etcd->pid();
      const cdt::net::HostPort at{"127.0.0.1", etcd->port()};
      open = [at] {
        return std::make_unique<cdt::EtcdStore>(at, std::chrono::seconds(30),
                                                std::chrono::seconds(60), 100000);
      };
    }
    const int n = o.members, k = o.churn;
    cdt::elastic::RendezvousOptions ro;
    ro.job_id = "scale-" + std::to_string(::getpid());
    ro.min_workers = n;
    ro.last_call = std::chrono::seconds(60);
    ro.timeout = std::chrono::seconds(120);
    std::vector<std::unique_ptr<cdt::Store>> stores(static_cast<size_t>(n + k));
    std::vector<Membership> got(static_cast<size_t>(n + k));
    std::vector<int> everyone(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) everyone[static_cast<size_t>(i)] = i;
    std::vector<Round> rounds;

    // Round 1: everyone starts at once.
    const double cpu0 = UseOf(store_pid).cpu_s;
    const double first = RunTogether(n, [&](int i) {
      stores[static_cast<size_t>(i)] = connect();
      cdt::elastic::RendezvousOptions mine = ro;
      mine.worker_id = i;
      got[static_cast<size_t>(i)] =
          cdt::elastic::JoinRound(*stores[static_cast<size_t>(i)], mine, 0, everyone);
    });
    CheckAgreement({got.begin(), got.begin() + n}, everyone, "generation 0");
    const double cpu1 = UseOf(store_pid).cpu_s;
    rounds.push_back({"form", n, first, cpu1 - cpu0, &requests[0]});

    // Round 2: k spares announce and wait; k members leave (reported gone) and the rest regroup.
    std::vector<int> expected;
    for (int i = k; i < n; ++i) expected.push_back(i);
    for (int s = 0; s < k; ++s) expected.push_back(n + s);
    round_now = 1;
    for (int s = 0; s < k; ++s) {
      stores[static_cast<size_t>(n + s)] = connect();
      cdt::elastic::AnnounceSpare(*stores[static_cast<size_t>(n + s)], ro.job_id, n + s);
    }
    ro.target_world = n;
    ro.min_workers = 1;
    const double cpu2 = UseOf(store_pid).cpu_s;
    const double second = RunTogether(n + k, [&](int t) {
      // Threads 0..k-1 are the leavers' agents, k..n-1 the survivors, n..n+k-1 the spares.
      if (t < k)
        return cdt::elastic::ReportGone(*stores[static_cast<size_t>(t)], ro.job_id, t,
                                        "left (rendezvous_scale)");
      cdt::Store& store = *stores[static_cast<size_t>(t)];
      cdt::elastic::RendezvousOptions mine = ro;
      mine.worker_id = t;
      if (t < n) {
        got[static_cast<size_t>(t)] = cdt::elastic::JoinRound(store, mine, 1, everyone);
        return;
      }
      const int64_t g = cdt::elastic::WaitForRound(store, mine, 1);
      if (g != 1) throw std::runtime_error("a spare was offered generation " + std::to_string(g));
      got[static_cast<size_t>(t)] = cdt::elastic::JoinRound(
          store, mine, 1, cdt::elastic::MembersOf(store, ro.job_id, 0, ro.timeout));
      cdt::elastic::SpareJoined(store, ro.job_id, t);
    });
    CheckAgreement({got.begin() + k, got.end()}, expected, "generation 1");
    const ProcessUse use = UseOf(store_pid);
    rounds.push_back({"churn " + std::to_string(k), n, second, use.cpu_s - cpu2, &requests[1]});

    std::printf("%-10s %-12s %8s %10s %12s %13s %10s\n", "store", "round", "members", "seconds",
                "store cpu s", "store rss MiB", "requests");
    std::string json = "[";
    for (const Round& r : rounds) {
      std::printf("%-10s %-12s %8d %10.2f %12.2f %13.1f %10lld  (%s)\n", o.store.c_str(),
                  r.name.c_str(), r.members, r.seconds, r.store_cpu_s, use.peak_rss_mib,
                  static_cast<long long>(r.requests->Total()), r.requests->Text().c_str());
      char line[512];
      std::snprintf(line, sizeof line,
                    "%s{\"store\": \"%s\", \"round\": \"%s\", \"members\": %d, \"seconds\": %.3f, "
                    "\"store_cpu_s\": %.3f, \"store_peak_rss_mib\": %.1f, \"requests\": %lld}",
                    json.size() > 1 ? ", " : "", o.store.c_str(), r.name.c_str(), r.members,
                    r.seconds, r.store_cpu_s, use.peak_rss_mib,
                    static_cast<long long>(r.requests->Total()));
      json += line;
    }
    json += "]\n";
    if (tcp)
      std::printf("connections the store dropped or refused: %llu\n",
                  static_cast<unsigned long long>(tcp->Rejected()));
    if (!o.json.empty()) std::ofstream(o.json) << json;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rendezvous_scale: %s\n", e.what());
    return 1;
  }
}
