// cann_dist._C: the compiled half of the Python package (python/cann_dist; docs/python.md).
// The package's __init__ registers ProcessGroupCDT as torch.distributed's "cdt" backend.
#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/python.h>

#include "cdt/error.h"
#include "cdt/version.h"
#include "compress/registry.h"
#include "python/comm_hook.h"
#include "comm/store/etcd_store.h"
#include "comm/store/tcp_store_client.h"
#include "comm/transport/socket.h"
#include "elastic/checkpoint_store.h"
#include "elastic/health_monitor.h"
#include "python/elastic_run.h"
#include "python/engine_store.h"
#include "python/green_job.h"
#include "topology/discovery.h"
#include "topology/discovery_report.h"
#include "green/carbon_sources.h"
#include "green/carbon_tracker.h"
#include "green/certificate.h"
#include "python/process_group.h"

namespace py = pybind11;

namespace {

void BindProcessGroup(py::module_& m) {
  // 1.13: a ProcessGroup; 2.x: a Backend, which torch's ProcessGroup wraps (process_group.h).
  py::object base = py::module::import("torch._C._distributed_c10d")
                        .attr(TORCH_VERSION_MAJOR >= 2 ? "Backend" : "ProcessGroup");
  py::class_<cdt::python::ProcessGroupCDT, c10::intrusive_ptr<cdt::python::ProcessGroupCDT>>(
      m, "ProcessGroupCDT", base)
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& secret,
                       const std::string& job_id, const std::string& advertise_host,
                       bool shared_memory, bool encrypt, bool allow_insecure,
                       size_t inline_max_bytes, bool shm_single_copy) {
             cdt::python::ProcessGroupOptions o;
             o.secret = secret;
             o.job_id = job_id;
             o.advertise_host = advertise_host;
             o.shared_memory = shared_memory;
             o.encrypt = encrypt;
             o.allow_insecure = allow_insecure;
             o.inline_max_bytes = inline_max_bytes;
             o.shm_single_copy = shm_single_copy;
             return c10::make_intrusive<cdt::python::ProcessGroupCDT>(store, rank, size, timeout,
                                                                      o);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("secret") = "", py::arg("job_id") = "cdt",
           py::arg("advertise_host") = "127.0.0.1", py::arg("shared_memory") = true,
           py::arg("encrypt") = false, py::arg("allow_insecure") = false,
           py::arg("inline_max_bytes") = cdt::CommunicatorOptions{}.inline_max_bytes,
           py::arg("shm_single_copy") = true, py::call_guard<py::gil_scoped_release>(),
           "Forms the group through `store` (every rank at once); "
           "torch.distributed.init_process_group(\"cdt\") calls this.");

}

void BindCompressionHook(py::module_& m) {
  py::class_<cdt::python::CompressionHook, std::shared_ptr<cdt::python::CompressionHook>>(
      m, "CompressionHook",
      "The engine's compressors with error feedback for DDP (cann_dist.hooks.compress).")
      .def(py::init([](const c10::intrusive_ptr<::c10d::ProcessGroup>& pg,
                       const std::string& method, double ratio, int powersgd_rank, uint64_t seed,
                       bool error_feedback, const std::string& values, int64_t interval,
                       int high_rank, int low_rank, double min_exposed) {
             namespace compress = cdt::compress;
             try {
               std::optional<compress::AdaptiveOptions> adaptive;
               if (method == "adaptive") {
                 adaptive = compress::AdaptiveOptions{};
                 if (interval < 1 || high_rank < 1 || low_rank < 1 || !(min_exposed >= 0))
                   throw cdt::Error(cdt::ErrorCode::kInvalidArgument,
                                    "interval, high_rank and low_rank must be at least 1, "
                                    "min_exposed at least 0");
                 adaptive->interval = interval;
                 adaptive->high_rank = high_rank;
                 adaptive->low_rank = low_rank;
                 adaptive->min_exposed = min_exposed;
               }
               const compress::Method m =
                   adaptive ? compress::Method::kNone : compress::MethodNamed(method, "compressor");
               compress::CompressorOptions o;
               o.ratio = ratio > 0 ? ratio : compress::DefaultRatio(m);
               if (!(o.ratio > 0)) o.ratio = 0.01;  // unused by the dense methods
               o.powersgd_rank = powersgd_rank;
               o.seed = seed;
               o.error_feedback = error_feedback;
               o.sparse_values = compress::SparseValuesNamed(values, "values");
               return std::make_shared<cdt::python::CompressionHook>(pg, m, o, adaptive);
             } catch (const cdt::Error& e) {
               throw py::value_error(std::string("cann_dist.hooks.compress: ") + e.what());
             }
           }),
           py::arg("process_group"), py::arg("method"), py::arg("ratio") = 0.0,
           py::arg("powersgd_rank") = 2, py::arg("seed") = 1, py::arg("error_feedback") = true,
           py::arg("values") = "fp32", py::arg("interval") = 50, py::arg("high_rank") = 2,
           py::arg("low_rank") = 4, py::arg("min_exposed") = 0.05)
      .def(
          "reduce",
          [](cdt::python::CompressionHook& h, int64_t bucket, at::Tensor buffer,
             const std::vector<std::pair<int64_t, int64_t>>& shapes, py::function done) {
            // Released on the engine's thread: the last reference drops with the GIL held.
            std::shared_ptr<py::function> callback(new py::function(std::move(done)),
                                                   [](py::function* f) {
                                                     py::gil_scoped_acquire gil;
                                                     delete f;
                                                   });
            h.Reduce(bucket, buffer, shapes, [callback](std::exception_ptr error) {
              py::gil_scoped_acquire gil;
              std::string what;
              if (error) {
                try {
                  std::rethrow_exception(error);
                } catch (const std::exception& e) {
                  what = e.what();
                } catch (...) {
                  what = "unknown error";
                }
              }
              try {
                (*callback)(error ? py::object(py::str(what)) : py::object(py::none()));
              } catch (py::error_already_set& e) {
                e.discard_as_unraisable("cann_dist.hooks.compress callback");
              }
            });
          },
          py::arg("bucket"), py::arg("buffer"), py::arg("shapes"), py::arg("done"),
          "Reduces the bucket in place to the ranks' mean, then calls done(None) or "
          "done(error message) from the engine's thread.")
      .def(
          "decisions",
          [](cdt::python::CompressionHook& h) {
            py::list out;
            for (const auto& d : h.Decisions()) {
              py::dict e;
              e["from_step"] = d.from_step;
              e["phase"] = d.phase;
              e["reason"] = d.reason;
              e["buckets"] = d.buckets;
              out.append(e);
            }
            return out;
          },
          "Adaptive: every decision so far (from_step, phase, reason, per bucket).")
      .def("state", &cdt::python::CompressionHook::State,
           "Every bucket's compressor state (error-feedback residuals) by bucket index.")
      .def(
          "state_tensors",
          [](cdt::python::CompressionHook& h) {
            std::map<int64_t, at::Tensor> out;
            for (const auto& [b, v] : h.State())
              out[b] = at::tensor(c10::ArrayRef<float>(v.data(), v.size()));
            return out;
          },
          "state() as float32 tensors (a copy; cheap to commit every step).")
      .def(
          "set_state_tensors",
          [](cdt::python::CompressionHook& h, const std::map<int64_t, at::Tensor>& state,
             bool residuals) {
            std::map<int64_t, std::vector<float>> s;
            for (const auto& [b, t] : state) {
              const at::Tensor c = t.to(at::kFloat).contiguous();
              s[b].assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
            }
            return h.SetState(s, residuals);
          },
          py::arg("state"), py::arg("residuals") = true, "set_state() from state_tensors().")
      .def("set_state", &cdt::python::CompressionHook::SetState, py::arg("state"),
           py::arg("residuals") = true,
           "Restores State()'s result (residuals=False: all but the error-feedback residuals, "
           "which start from zero); returns what could not be used, in words (\"\": all).");

}

void BindElastic(py::module_& m) {
  using cdt::python::ElasticRunConfig;
  py::class_<ElasticRunConfig>(m, "ElasticRunConfig",
                               "What the launcher's environment says (cann_dist.elastic reads it).")
      .def(py::init<>())
      .def_readwrite("job_id", &ElasticRunConfig::job_id)
      .def_readwrite("worker_id", &ElasticRunConfig::worker_id)
      .def_readwrite("world_size", &ElasticRunConfig::world_size)
      .def_readwrite("target_world", &ElasticRunConfig::target_world)
      .def_readwrite("min_workers", &ElasticRunConfig::min_workers)
      .def_readwrite("spare", &ElasticRunConfig::spare)
      .def_readwrite("joiner", &ElasticRunConfig::joiner)
      .def_readwrite("node_rank", &ElasticRunConfig::node_rank)
      .def_readwrite("local_rank", &ElasticRunConfig::local_rank)
      .def_readwrite("rdzv_backend", &ElasticRunConfig::rdzv_backend)
      .def_readwrite("master_addr", &ElasticRunConfig::master_addr)
      .def_readwrite("master_port", &ElasticRunConfig::master_port)
      .def_readwrite("secret", &ElasticRunConfig::secret)
      .def_readwrite("node_addr", &ElasticRunConfig::node_addr)
      .def_readwrite("encrypt", &ElasticRunConfig::encrypt)
      .def_readwrite("allow_insecure", &ElasticRunConfig::allow_insecure)
      .def_readwrite("timeout_s", &ElasticRunConfig::timeout_s)
      .def_readwrite("last_call_s", &ElasticRunConfig::last_call_s)
      .def_readwrite("pause_timeout_s", &ElasticRunConfig::pause_timeout_s)
      .def_readwrite("inject", &ElasticRunConfig::inject)
      .def_readwrite("log_level", &ElasticRunConfig::log_level)
      .def_readwrite("shared_memory", &ElasticRunConfig::shared_memory)
      .def_readwrite("shm_single_copy", &ElasticRunConfig::shm_single_copy)
      .def_readwrite("inline_max_bytes", &ElasticRunConfig::inline_max_bytes);
  m.def(
      "run_elastic",
      [](const ElasticRunConfig& c, py::object driven) {
        try {
          return cdt::python::RunElasticFromPython(c, std::move(driven));
        } catch (const cdt::Error& e) {
          throw std::runtime_error(std::string("cann_dist.elastic.run: worker ") +
                                   std::to_string(c.worker_id) + ": " + e.what());
        }
      },
      py::arg("config"), py::arg("driven"),
      "Runs the elastic driver over `driven` (cann_dist.elastic._Driven) until the job ends.");

}

// A discovered topology kept for CommunicationOptimizer (its cost model answers later questions).
struct TopologyHandle {
  cdt::topology::Discovery discovery;
  int world_size = 1;
};

void BindTopology(py::module_& m) {
  namespace topology = cdt::topology;
  py::class_<TopologyHandle>(m, "Topology", "A discovered topology (cann_dist.topology).")
      .def("json",
           [](const TopologyHandle& t) {
             return topology::DiscoveryReportJson(t.discovery, t.world_size);
           })
      .def(
          "advise",
          [](const TopologyHandle& t, double gradient_bytes, double compute_ms) {
            topology::CompressionAdviceOptions o;
            o.gradient_bytes = gradient_bytes;
            if (compute_ms > 0) o.compute_budget_us = compute_ms * 1e3;
            return topology::CompressionAdviceJson(
                topology::AdviseCompression(t.discovery.planner->model(), o), o);
          },
          py::arg("gradient_bytes"), py::arg("compute_ms") = 0.0,
          py::call_guard<py::gil_scoped_release>(),
          "The compression advice for a float32 gradient of this many bytes per step.");
  m.def(
      "scan_topology",
      [](const c10::intrusive_ptr<::c10d::ProcessGroup>& pg, const std::string& cache_dir,
         bool rescan, bool install) {
        auto* cdt_pg = cdt::python::CdtBackendOf(pg);
        if (cdt_pg == nullptr)
          throw py::value_error("cann_dist.TopologyMapper.scan: the group's backend is " +
                                pg->getBackendName() +
                                "; the scan measures the engine's own links: use the \"cdt\" "
                                "backend (init_process_group(\"cdt\"))");
        cdt::Communicator& comm = cdt_pg->communicator();
        auto handle = std::make_unique<TopologyHandle>();
        {
          py::gil_scoped_release release;
          topology::DiscoveryOptions o;
          o.cache_dir = cache_dir;
          o.rescan = rescan;
          handle->discovery = topology::Discover(comm, o);
          handle->world_size = comm.size();
          if (install) comm.SetAllreduceSelector(handle->discovery.planner);
        }
        return handle;
      },
      py::arg("process_group"), py::arg("cache_dir") = "", py::arg("rescan") = false,
      py::arg("install") = true,
      "Discovers the topology on every rank of the group (a collective); `install`: the group's "
      "allreduces follow its plan from now on.");
}

void BindGreen(py::module_& m) {
  namespace green = cdt::green;
  py::class_<green::CarbonTracker>(m, "CarbonTracker",
                                   "Energy and carbon of what runs between start() and stop() "
                                   "(cann_dist.green.CarbonTracker wraps it).")
      .def(py::init([](const std::string& trace_path, const std::string& profiles_path,
                       double trace_start_unix, double seconds_per_hour, double pue,
                       double interval_s, const std::string& project_name,
                       const std::string& run_id, const std::string& country_iso_code,
                       bool process_scope) {
             try {
               green::CarbonTrackerOptions o;
               o.meters.profiles_path = profiles_path;
               if (process_scope) o.meters.scope = green::ModelMeterOptions::Scope::kProcess;
               o.timebase.trace_start = trace_start_unix;
               o.timebase.seconds_per_hour = seconds_per_hour;
               o.pue = pue;
               o.interval = std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000));
               o.project_name = project_name;
               o.run_id = run_id;
               o.country_iso_code = country_iso_code;
               return std::make_unique<green::CarbonTracker>(green::ReadCarbonTrace(trace_path), o);
             } catch (const cdt::Error& e) {
               throw py::value_error(std::string("cann_dist.green.CarbonTracker: ") + e.what());
             }
           }),
           py::arg("trace_path"), py::arg("profiles_path"), py::arg("trace_start_unix"),
           py::arg("seconds_per_hour") = 3600.0, py::arg("pue") = 1.0, py::arg("interval_s") = 1.0,
           py::arg("project_name") = "cann-dist-train", py::arg("run_id") = "",
           py::arg("country_iso_code") = "", py::arg("process_scope") = false)
      .def("start", &green::CarbonTracker::Start)
      .def("report", [](green::CarbonTracker& t) { return green::ReportJson(t.Report()); },
           py::call_guard<py::gil_scoped_release>(), "The run so far, as green_report.json's JSON.")
      .def(
          "stop",
          [](green::CarbonTracker& t, const std::string& emissions_csv) {
            const green::GreenReport r = t.Stop();
            if (!emissions_csv.empty()) green::AppendEmissionsCsv(emissions_csv, r);
            return green::ReportJson(r);
          },
          py::arg("emissions_csv") = "", py::call_guard<py::gil_scoped_release>(),
          "Stops; appends CodeCarbon's row to `emissions_csv` (if given); the report's JSON.")
      .def_property_readonly("meter", &green::CarbonTracker::meter_description);

  // Signed reports (green/certificate.h): what `cann-dist-train cert issue|verify` does.
  m.def("ensure_signing_key", &green::EnsureSigningKey, py::arg("path"),
        "Creates the Ed25519 key file (0600) unless it exists; the base64 public key.");
  m.def(
      "issue_certificate",
      [](const py::bytes& report, const std::string& name, const std::string& key_path) {
        return green::IssueCertificate(std::string(report), name, key_path);
      },
      py::arg("report_bytes"), py::arg("report_name"), py::arg("key_path"),
      "The certificate (JSON) signing these bytes with the key file.");
  m.def(
      "verify_certificate",
      [](const py::bytes& report, const std::string& certificate,
         const std::vector<std::string>& trusted) {
        const green::Verification v =
            green::VerifyCertificate(std::string(report), certificate, trusted);
        py::dict d;
        d["ok"] = v.ok;
        d["trusted"] = v.trusted;
        d["public_key"] = v.public_key;
        d["why"] = v.why;
        return d;
      },
      py::arg("report_bytes"), py::arg("certificate_json"), py::arg("trusted_public_keys"));
  m.def("read_trusted_keys", &green::ReadTrustedKeys, py::arg("path"));

  using cdt::python::GreenRunConfig;
  py::class_<GreenRunConfig>(m, "GreenRunConfig", "cann_dist.green.GreenScheduler's settings.")
      .def(py::init<>())
      .def_readwrite("trace_path", &GreenRunConfig::trace_path)
      .def_readwrite("profiles_path", &GreenRunConfig::profiles_path)
      .def_readwrite("strategy", &GreenRunConfig::strategy)
      .def_readwrite("run_id", &GreenRunConfig::run_id)
      .def_readwrite("start_unix", &GreenRunConfig::start_unix)
      .def_readwrite("time_scale", &GreenRunConfig::time_scale)
      .def_readwrite("pue", &GreenRunConfig::pue)
      .def_readwrite("deadline_hours", &GreenRunConfig::deadline_hours)
      .def_readwrite("carbon_cap_kg", &GreenRunConfig::carbon_cap_kg)
      .def_readwrite("batch", &GreenRunConfig::batch)
      .def_readwrite("calibrate_steps", &GreenRunConfig::calibrate_steps)
      .def_readwrite("min_batch", &GreenRunConfig::min_batch)
      .def_readwrite("max_batch", &GreenRunConfig::max_batch)
      .def_readwrite("green_priority", &GreenRunConfig::green_priority)
      .def_readwrite("forecast", &GreenRunConfig::forecast)
      .def_readwrite("replan_hours", &GreenRunConfig::replan_hours);
  m.def(
      "run_carbon_aware",
      [](const GreenRunConfig& c, py::object job, py::object say,
         const std::string& emissions_csv) {
        try {
          return cdt::python::RunGreenFromPython(c, std::move(job), std::move(say),
                                                 emissions_csv);
        } catch (const cdt::Error& e) {
          throw py::value_error(std::string("cann_dist.green.GreenScheduler: ") + e.what());
        }
      },
      py::arg("config"), py::arg("job"), py::arg("say"), py::arg("emissions_csv") = "",
      "Calibrates, plans and runs `job` carbon-aware; appends CodeCarbon's row to "
      "`emissions_csv` (if given); the report's JSON.");
}

}  // namespace

void BindJobStore(py::module_& m) {
  m.def(
      "connect_job_store",
      [](const std::string& host, int port, const std::string& secret, double timeout_s,
         const std::string& backend) -> c10::intrusive_ptr<::c10d::Store> {
        const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
        try {
          const cdt::net::HostPort hp =
              cdt::net::ParseHostPort(host + ":" + std::to_string(port), "MASTER_ADDR:MASTER_PORT");
          std::shared_ptr<cdt::Store> store;
          if (backend == "etcd")
            store = std::make_shared<cdt::EtcdStore>(hp, timeout);
          else
            store = std::make_shared<cdt::TcpStoreClient>(hp, secret, timeout);
          return c10::make_intrusive<cdt::python::EngineStore>(std::move(store), timeout);
        } catch (const cdt::Error& e) {
          throw std::runtime_error(std::string("cann_dist: the launcher's store at ") + host + ":" +
                                   std::to_string(port) + ": " + e.what());
        }
      },
      py::arg("host"), py::arg("port"), py::arg("secret"), py::arg("timeout_s"),
      py::arg("backend") = "tcp", py::call_guard<py::gil_scoped_release>(),
      "The store `cann-dist-train launch` hosts (authenticated by the job secret), as a torch "
      "Store.");
}

void BindCheckpoints(py::module_& m) {
  namespace elastic = cdt::elastic;
  py::class_<elastic::CheckpointWriter>(
      m, "CheckpointWriter",
      "The engine's checkpoint writer: asynchronous, compressed, incremental, checksummed "
      "(cann_dist.checkpoint.CheckpointManager wraps it; docs/checkpoint-format.md).")
      .def(py::init([](const std::string& dir, const std::string& codec, bool incremental,
                       int full_every, int keep, const std::string& quantize) {
             elastic::CheckpointOptions o;
             o.dir = dir;
             o.codec = codec;
             o.incremental = incremental;
             o.full_every = full_every;
             o.keep = keep;
             o.quantize = quantize;
             try {
               return std::make_unique<elastic::CheckpointWriter>(o);
             } catch (const cdt::Error& e) {
               throw py::value_error(std::string("cann_dist.CheckpointManager: ") + e.what());
             }
           }),
           py::arg("dir"), py::arg("codec") = "lz4", py::arg("incremental") = true,
           py::arg("full_every") = 10, py::arg("keep") = 2, py::arg("quantize") = "none")
      .def(
          "submit",
          [](elastic::CheckpointWriter& w, int64_t step, const py::bytes& state,
             const std::vector<std::pair<uint64_t, uint64_t>>& floats) {
            std::string bytes(state);
            std::vector<elastic::FloatSpan> spans;
            for (const auto& [offset, count] : floats) spans.push_back({offset, count});
            py::gil_scoped_release release;
            w.Submit(step, std::move(bytes), std::move(spans));
          },
          py::arg("step"), py::arg("state"), py::arg("float_spans") = std::vector<std::pair<uint64_t, uint64_t>>{},
          "Queues the state and returns (waits first for a write still in flight).")
      .def("flush", &elastic::CheckpointWriter::Flush, py::call_guard<py::gil_scoped_release>())
      .def("blocked_seconds", &elastic::CheckpointWriter::blocked_seconds)
      .def("records", [](const elastic::CheckpointWriter& w) {
        py::list out;
        for (const auto& r : w.records()) {
          py::dict d;
          d["step"] = r.step;
          d["path"] = r.path;
          d["full"] = r.full;
          d["state_bytes"] = r.state_bytes;
          d["file_bytes"] = r.file_bytes;
          d["chunks"] = r.chunks;
          d["chunks_unchanged"] = r.chunks_unchanged;
          d["encode_s"] = r.encode_s;
          d["write_s"] = r.write_s;
          out.append(d);
        }
        return out;
      });
  m.def(
      "load_newest_checkpoint",
      [](const std::string& dir) -> py::object {
        std::vector<std::string> skipped;
        std::optional<elastic::LoadedCheckpoint> c;
        {
          py::gil_scoped_release release;
          c = elastic::LoadNewestCheckpoint(dir, &skipped);
        }
        if (!c) return py::make_tuple(py::none(), py::none(), py::none(), skipped);
        std::vector<std::string> warnings = c->warnings;
        return py::make_tuple(c->step, py::bytes(c->state), c->path, warnings);
      },
      py::arg("dir"),
      "(step, state bytes, path, warnings) of the newest checkpoint that verifies; (None, None, "
      "None, warnings) when there is none.");
}

void BindHealth(py::module_& m) {
  namespace elastic = cdt::elastic;
  py::class_<elastic::FailurePredictor>(
      m, "FailurePredictor",
      "The engine's failure predictor (elastic/health_monitor.h); cann_dist.HealthMonitor feeds it.")
      .def(py::init([](int baseline_samples, double slow_factor, int slow_patience,
                       double memory_limit_bytes, double memory_horizon_s, double retrans_per_s,
                       double temperature_limit_c) {
             elastic::PredictorOptions o;
             o.baseline_samples = baseline_samples;
             o.slow_factor = slow_factor;
             o.slow_patience = slow_patience;
             o.memory_limit_bytes = memory_limit_bytes;
             o.memory_horizon_s = memory_horizon_s;
             o.retrans_per_s = retrans_per_s;
             o.temperature_limit_c = temperature_limit_c;
             return elastic::FailurePredictor(o);
           }),
           py::arg("baseline_samples") = 20, py::arg("slow_factor") = 1.5,
           py::arg("slow_patience") = 5, py::arg("memory_limit_bytes") = 0.0,
           py::arg("memory_horizon_s") = 60.0, py::arg("retrans_per_s") = 50.0,
           py::arg("temperature_limit_c") = 90.0)
      .def(
          "observe",
          [](elastic::FailurePredictor& p, double t, double step_time_s, double rss_bytes,
             double tcp_retrans, double temperature_c) -> py::object {
            const auto w = p.Observe({t, step_time_s, rss_bytes, tcp_retrans, temperature_c});
            if (!w) return py::none();
            py::dict d;
            d["t"] = w->t;
            d["rule"] = w->rule;
            d["detail"] = w->detail;
            return d;
          },
          py::arg("t"), py::arg("step_time_s"), py::arg("rss_bytes"), py::arg("tcp_retrans"),
          py::arg("temperature_c"));
  m.def("read_tcp_retrans", [] { return elastic::ReadTcpRetransSegs(); });
  m.def("read_resident_bytes", [](int pid) { return elastic::ReadResidentBytes(pid); },
        py::arg("pid"));
  m.def("read_max_temperature_c", [] { return elastic::ReadMaxTemperatureC(); });
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "cann-dist-train's engine for torch.distributed (the \"cdt\" backend)";
  m.attr("__version__") = cdt::Version();
  BindProcessGroup(m);
  BindJobStore(m);
  BindCheckpoints(m);
  BindHealth(m);
  BindCompressionHook(m);
  BindElastic(m);
  BindTopology(m);
  BindGreen(m);
}
