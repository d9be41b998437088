#include "python/elastic_run.h"

#include <pybind11/stl.h>
#include <torch/python.h>

#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "cdt/error.h"
#include "cdt/log.h"
#include "cdt/tcp_communicator.h"
#include "comm/store/etcd_store.h"
#include "comm/store/tcp_store_client.h"
#include "comm/transport/socket.h"
#include "elastic/driver.h"
#include "python/engine_store.h"
#include "python/process_group.h"

namespace py = pybind11;

namespace cdt::python {
namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::unique_ptr<Store> OpenStore(const ElasticRunConfig& c) {
  const net::HostPort hp = net::ParseHostPort(c.master_addr + ":" + std::to_string(c.master_port),
                                              "MASTER_ADDR:MASTER_PORT");
  if (c.rdzv_backend == "etcd") return std::make_unique<EtcdStore>(hp, Ms(c.timeout_s));
  if (c.secret.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "worker " + std::to_string(c.worker_id) +
                    ": CDT_JOB_SECRET is not set; cann_dist.elastic.run needs the job's store, "
                    "which `cann-dist-train launch --elastic` hosts and names in the environment");
  return std::make_unique<TcpStoreClient>(hp, c.secret, Ms(c.timeout_s));
}

// The Python training as the driver's state. Every call into Python takes the GIL; the driver
// runs without it.
class PythonState : public elastic::ElasticState {
 public:
  PythonState(py::object driven, std::shared_ptr<Store> torch_store,
              std::chrono::milliseconds timeout)
      : driven_(std::move(driven)), torch_store_(std::move(torch_store)), timeout_(timeout) {}

  void Prepare() override {}

  int Train(const elastic::Generation& g) override {
    const elastic::Membership& m = g.membership;
    auto pg = c10::make_intrusive<ProcessGroupCDT>(g.comm, m.rank, m.world);
    auto store = c10::make_intrusive<EngineStore>(torch_store_, timeout_);
    std::function<bool(int64_t)> before_step = g.before_step;
    bool regroup = false;
    std::optional<Error> failure;
    int code = 0;
    {
      py::gil_scoped_acquire gil;
      py::dict info;
      info["generation"] = m.generation;
      info["rank"] = m.rank;
      info["world"] = m.world;
      info["workers"] = m.workers;
      info["process_group"] = py::cast(pg);
      info["store"] = py::cast(c10::intrusive_ptr<::c10d::Store>(store));
      info["before_step"] = py::cpp_function(
          [before_step](int64_t step) {
            py::gil_scoped_release release;  // fault injection may sleep or stop this process
            return before_step(step);
          },
          py::arg("step"));
      try {
        code = driven_.attr("train")(info).cast<int>();
      } catch (py::error_already_set& e) {
        if (e.matches(driven_.attr("regroup_exception"))) {
          regroup = true;
        } else {
          failure = pg->failure();
          if (!failure) {  // the user's own error: it ends the job, unchanged
            info.clear();
            Release(g, pg);
            throw;
          }
        }
      }
      info.clear();
    }
    Release(g, pg);
    if (regroup) throw Error(ErrorCode::kAborted, "regroup: workers are waiting to join the group");
    if (failure) throw *failure;
    return code;
  }

  void Restore(const elastic::Failure& f) override {
    py::gil_scoped_acquire gil;
    py::dict d;
    d["cause"] = f.cause;
    d["lost"] = f.lost;
    d["failure_unix"] = f.failure_unix;
    d["detected_unix"] = f.detected_unix;
    d["failed_step"] = f.failed_step;
    d["world_before"] = f.world_before;
    driven_.attr("restore")(d);
  }
  void Forget() override {
    py::gil_scoped_acquire gil;
    driven_.attr("forget")();
  }
  std::string Checkpoint() override {
    py::gil_scoped_acquire gil;
    return driven_.attr("checkpoint")().cast<std::string>();
  }
  int64_t current_step() const override {
    py::gil_scoped_acquire gil;
    return driven_.attr("current_step")().cast<int64_t>();
  }
  double mean_step_s() const override {
    py::gil_scoped_acquire gil;
    return driven_.attr("mean_step_s")().cast<double>();
  }

 private:
  // The generation is over: its communicator fails what is pending at once (the driver aborts it
  // too on a failure), and the process group lets go of it (Python may still hold the group: a
  // traceback's frames hold the DDP model that holds it).
  static void Release(const elastic::Generation& g, const c10::intrusive_ptr<ProcessGroupCDT>& pg) {
    if (pg->failure()) g.comm->Abort();
    pg->Detach();
  }

  py::object driven_;
  std::shared_ptr<Store> torch_store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

int RunElasticFromPython(const ElasticRunConfig& c, py::object driven) {
  const LogLevel level = ParseLogLevel(c.log_level).value_or(LogLevel::kInfo);
  const Log log = Log(level).ForRank(c.worker_id);
  std::unique_ptr<Store> store = OpenStore(c);
  std::shared_ptr<Store> torch_store = OpenStore(c);  // its own connection, for torch's calls

  Store& s = *store;
  const elastic::DriverOptions d = elastic::WorkerDriverOptions(c, s, log);

  PythonState state(std::move(driven), torch_store, Ms(c.timeout_s));
  py::gil_scoped_release release;
  return elastic::RunElastic(s, d, state, [&](const elastic::Membership& m) {
    CommunicatorOptions co;
    co.rank = m.rank;
    co.size = m.world;
    co.generation = static_cast<uint64_t>(m.generation);
    co.job_id = c.job_id;
    co.secret = c.secret;
    co.timeout = Ms(c.timeout_s);
    co.advertise_host = c.node_addr;
    co.encrypt = c.encrypt;
    co.allow_insecure = c.allow_insecure;
    co.shared_memory = c.shared_memory;
    co.shm_single_copy = c.shm_single_copy;
    co.inline_max_bytes = c.inline_max_bytes;
    co.log = log.ForRank(m.rank);
    elastic::Channels ch;
    ch.comm = ConnectTcpCommunicator(s, co);
    return ch;
  });
}

}  // namespace cdt::python
