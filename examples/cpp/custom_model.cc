// A user-defined libtorch model trained with cann-dist-train as a library — no CLI: the Trainer
// (train/trainer.h), the elastic driver (elastic/driver.h) and the carbon-aware runner
// (green/carbon_aware_runner.h). This is the API the Python front end wraps.
//
//   # 2 processes, data parallel (rank 0 hosts the store on 127.0.0.1:PORT)
//   export CDT_JOB_SECRET=$(cann-dist-train secret)
//   cdt_example_custom_model --rank 0 --world 2 --port 29600 --json out.json &
//   cdt_example_custom_model --rank 1 --world 2 --port 29600
//
//   # elastic: worker 2 kills itself at step 20, the two others re-form and finish
//   for r in 0 1 2; do
//     cdt_example_custom_model --mode elastic --rank $r --world 3 --port 29601 --inject kill:2@20 &
//   done; wait
//
//   # carbon-aware, one process: calibrate, plan into the cleanest hours of the trace, follow
//   cdt_example_custom_model --mode green --trace knowledge_base/carbon_traces/CISO_2022.csv
//   (from the repository root: --profiles defaults to knowledge_base/hardware_profiles/...)
//
// Argument parsing is by hand to keep the example to the library; a real program would use its
// own flags library.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "comm/store/memory_store.h"
#include "comm/store/tcp_store_client.h"
#include "comm/store/tcp_store_server.h"
#include "common/clock.h"
#include "common/file_io.h"
#include "elastic/driver.h"
#include "elastic/fault_injector.h"
#include "green/carbon_aware_runner.h"
#include "green/carbon_sources.h"
#include "green/iso_time.h"
#include "train/elastic_training.h"
#include "train/models.h"
#include "train/trainer.h"

namespace {

using namespace cdt;

// The user's model: any ClassifierModel maps [B, 1, 28, 28] images to [B, 10] logits. BeforeUse
// announces each layer's parameters just before the forward uses them, so that the trainer can
// apply each one's update as late as possible (overlapping communication with this forward); a
// model that announces nothing gets every update before its forward instead.
class TinyNet : public train::ClassifierModel {
 public:
  explicit TinyNet(int hidden) {
    fc1_ = register_module("fc1", torch::nn::Linear(784, hidden));
    fc2_ = register_module("fc2", torch::nn::Linear(hidden, 10));
  }
  std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& images) override {
    BeforeUse(*fc1_);
    torch::Tensor x = torch::relu(fc1_->forward(images.flatten(1)));
    BeforeUse(*fc2_);
    return {fc2_->forward(x), torch::Tensor()};  // no auxiliary loss
  }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

struct Args {
  std::string mode = "plain";  // plain | elastic | green
  int rank = 0, world = 1, port = 29600, steps = 200;
  std::string json, inject, trace, dir = "example-run";
  std::string profiles = "knowledge_base/hardware_profiles/devices.json";  // the energy model's
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mode")
      a.mode = v;
    else if (k == "--rank")
      a.rank = std::atoi(v.c_str());
    else if (k == "--world")
      a.world = std::atoi(v.c_str());
    else if (k == "--port")
      a.port = std::atoi(v.c_str());
    else if (k == "--steps")
      a.steps = std::atoi(v.c_str());
    else if (k == "--json")
      a.json = v;
    else if (k == "--inject")
      a.inject = v;
    else if (k == "--trace")
      a.trace = v;
    else if (k == "--dir")
      a.dir = v;
    else if (k == "--profiles")
      a.profiles = v;
    else
      throw Error(ErrorCode::kInvalidArgument, "unknown argument " + k);
  }
  return a;
}

train::TrainOptions Options(const Args& a) {
  train::TrainOptions o;
  o.model.name = "tinynet";          // a label in the result: the factory builds the model
  o.data.dataset = "fashion-mnist";  // Debian's dataset-fashion-mnist
  o.data.batch_size = 32;
  o.steps = a.steps;
  o.metrics.progress = false;
  o.threads = 1;
  return o;
}

train::ModelFactory TinyNetFactory() {
  return [](const train::ModelOptions&) { return std::make_shared<TinyNet>(64); };
}

int Report(const Args& a, const train::TrainResult& r, int rank) {
  if (rank == 0) {
    std::printf(
        "%s: %lld steps, loss %.4f, test accuracy %.4f, %.0f samples/s, parameters "
        "identical on every rank: %s, generation %lld\n",
        a.mode.c_str(), static_cast<long long>(r.steps), r.final_loss, r.test_accuracy,
        r.samples_per_s, r.params_consistent ? "yes" : "no", static_cast<long long>(r.generation));
    if (!a.json.empty()) WriteFileAtomically(a.json, train::TrainResultJson(r) + "\n");
  }
  return r.params_consistent ? 0 : 1;
}

// Rank 0 hosts the job's store; every rank (rank 0 too) is its client.
struct Rendezvous {
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<Store> store;
};
Rendezvous Connect(const Args& a, const std::string& secret) {
  Rendezvous r;
  if (a.rank == 0)
    r.server = std::make_unique<TcpStoreServer>("127.0.0.1", static_cast<uint16_t>(a.port), secret);
  r.store = std::make_unique<TcpStoreClient>(
      net::HostPort{"127.0.0.1", static_cast<uint16_t>(a.port)}, secret, std::chrono::seconds(30));
  return r;
}

CommunicatorOptions CommOptions(int rank, int world, int64_t generation,
                                const std::string& secret) {
  CommunicatorOptions co;
  co.rank = rank;
  co.size = world;
  co.generation = static_cast<uint64_t>(generation);
  co.job_id = "example";
  co.secret = secret;
  co.timeout = std::chrono::seconds(10);
  return co;
}

// Rank 0 keeps the store up until every rank that finished said so (or 30 s passed).
void Leave(Store& store, const Args& a, int finishing) {
  store.Add("example/left", 1);
  if (a.rank != 0) return;
  for (int i = 0; i < 300 && store.Add("example/left", 0) < finishing; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

int Plain(const Args& a, const std::string& secret) {
  Rendezvous rv = Connect(a, secret);
  std::unique_ptr<Communicator> comm =
      ConnectTcpCommunicator(*rv.store, CommOptions(a.rank, a.world, 0, secret));
  const train::TrainResult r =
      train::RunTraining(*comm, Options(a), nullptr, nullptr, TinyNetFactory());
  const int code = Report(a, r, a.rank);
  Leave(*rv.store, a, a.world);
  return code;
}

int Elastic(const Args& a, const std::string& secret) {
  Rendezvous rv = Connect(a, secret);
  elastic::DriverOptions d;
  d.rendezvous.job_id = "example";
  d.rendezvous.worker_id = a.rank;
  d.rendezvous.timeout = std::chrono::seconds(60);
  d.rendezvous.abandon_after = std::chrono::seconds(10);
  d.world_size = a.world;
  d.last_call_s = 1;  // no agent reports the dead here: a re-forming round waits this long
  d.where = {a.rank, 0, a.rank};
  d.faults = elastic::ParseFaults(a.inject);
  d.log = Log(LogLevel::kInfo).ForRank(a.rank);  // to stderr; a Log::Sink sends it elsewhere
  Store& store = *rv.store;
  d.fault_actions = elastic::SystemFaultActions(d.log, [&](int worker, const std::string& kind) {
    elastic::ReportFault(store, "example", worker, kind, UnixSeconds());
  });
  train::ElasticTraining state(
      Options(a), a.rank,
      [&a](const train::TrainResult& r, int rank) { return Report(a, r, rank); }, TinyNetFactory());
  int survivors = a.world;
  const int code = elastic::RunElastic(store, d, state, [&](const elastic::Membership& m) {
    survivors = m.world;
    elastic::Channels ch;
    ch.comm = ConnectTcpCommunicator(store, CommOptions(m.rank, m.world, m.generation, secret));
    return ch;
  });
  Leave(store, a, survivors);
  return code;
}

// The carbon-aware runner driving this process's trainer: each run is RunTraining on a one-rank
// group, resuming the checkpoint of the run before and stopping where the plan pauses.
class InProcessJob : public green::CarbonAwareJob {
 public:
  InProcessJob(const Args& a, std::string secret) : a_(a), secret_(std::move(secret)) {}
  green::RunResult Run(const green::RunRequest& r, const std::function<void()>& tick) override {
    train::TrainOptions o = Options(a_);
    o.data.batch_size = r.batch;
    o.checkpoint.dir = r.calibration ? a_.dir + "/" + r.tag : checkpoint_location();
    o.checkpoint.resume = r.resume;
    o.stop_after = r.stop_after;
    if (r.eval_every > 0) o.metrics.eval_every = r.eval_every;
    MemoryStore store;  // a one-rank group needs no network
    std::unique_ptr<Communicator> comm =
        ConnectTcpCommunicator(store, CommOptions(0, 1, generation_++, secret_));
    const train::TrainResult t = train::RunTraining(*comm, o, nullptr, nullptr, TinyNetFactory());
    tick();
    green::RunResult out;
    out.first_step = t.first_step;
    out.steps = t.steps;
    out.total_steps = t.total_steps;
    out.samples = static_cast<double>(t.samples);
    out.wall_s = t.wall_s;
    out.eval_s = t.eval_s;
    out.started_unix = t.started_unix;
    out.test_accuracy = t.test_accuracy;
    return out;
  }
  std::string checkpoint_location() const override { return a_.dir + "/checkpoints"; }

 private:
  const Args& a_;
  std::string secret_;
  int64_t generation_ = 0;
};

int Green(const Args& a, const std::string& secret) {
  const green::CarbonTrace trace = green::ReadCarbonTrace(a.trace);
  green::MeterSetOptions mo;
  mo.profiles_path = a.profiles;
  mo.scope = green::ModelMeterOptions::Scope::kProcess;
  green::MeterSet meter(mo);
  green::CarbonAwareOptions o;
  o.start_unix = *green::ParseIsoTime("2022-03-14T05:00:00Z");
  o.batch = 32;
  o.calibrate_steps = 20;
  o.time_scale = 0.25;  // a trace hour lasts a quarter of a second
  o.deadline_hours = 24;
  o.run_id = "example";
  o.say = [](const std::string& line) { std::printf("%s\n", line.c_str()); };
  InProcessJob job(a, secret);
  SystemClock clock;
  const green::GreenReport r = green::RunCarbonAware(
      job, trace, meter, clock, o, [&](const green::JobSpec& spec, double start) {
        green::Plans p;
        p.intensity = trace.Hourly(start, spec.deadline_hours);
        green::PlanOptions po;
        po.contiguous_partial = true;  // every stretch costs a restart
        p.plan = green::MakePlan(green::Strategy::kSuspendResume, spec, p.intensity, po);
        p.baseline = green::MakePlan(green::Strategy::kAgnostic, spec, p.intensity, po);
        return p;
      });
  std::printf(
      "green: %zu run(s), %.0f samples, %.6f kWh, %.4f g CO2 against %.4f g unpaused, "
      "test accuracy %.4f\n",
      r.actual.size(), r.samples, r.energy_kwh, r.carbon_kg * 1000, r.baseline_carbon_kg * 1000,
      r.final_test_accuracy);
  if (!a.json.empty()) WriteFileAtomically(a.json, green::ReportJson(r));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = Parse(argc, argv);
    const char* secret = std::getenv("CDT_JOB_SECRET");  // a user's program: its own environment
    const std::string s = secret ? secret : "";
    if (a.mode == "plain") return Plain(a, s);
    if (a.mode == "elastic") return Elastic(a, s);
    if (a.mode == "green") return Green(a, s);
    throw Error(ErrorCode::kInvalidArgument, "--mode " + a.mode + ": use plain, elastic or green");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cdt_example_custom_model: %s\n", e.what());
    return 2;
  }
}
