// Numbers from files and other processes are range-checked before they become integers (issue
// 41, item 9): a profile's 1e300, a cache file's version 1e300, a sysfs speed of "inf", a run's
// total_steps of INT64_MIN are refused naming the file and field (or read as "unknown"), never
// converted, which is undefined behaviour. Each test fails on the code before the fix by its
// assertions alone; clang's UBSan (the fuzz build) also stops on the conversions, while GCC's
// -fsanitize=undefined (`make asan-unit`) leaves float-cast-overflow out.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "cdt/error.h"
#include "common/checked_number.h"
#include "elastic/fault_spec.h"
#include "fake_clock.h"
#include "fake_file_system.h"
#include "green/batch_controller.h"
#include "green/carbon_aware_runner.h"
#include "green/carbon_sources.h"
#include "green/hardware_profile.h"
#include "green/iso_time.h"
#include "green/trace_plan.h"
#include "sim/assessment.h"
#include "sim/cluster_profile.h"
#include "sim/model_profile.h"
#include "topology/nic_scan.h"
#include "topology/strategy_cache.h"

namespace cdt {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// Runs `call`, which must throw cdt::Error whose message holds `says`.
template <typename F>
void ExpectRefused(F&& call, const std::string& says) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected an error saying '" << says << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

fs::path TempDir(const std::string& name) {
  const fs::path p =
      fs::path(::testing::TempDir()) / ("cdt_numbers_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(CheckedNumber, ConvertsOnlyWhatFits) {
  EXPECT_EQ(WholeNumberIn(4.0, 1, 10), 4);
  EXPECT_EQ(WholeNumberIn(-3.0, -5, 0), -3);
  for (double bad : {4.5, 1e300, -1e300, 11.0, 0.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()})
    EXPECT_FALSE(WholeNumberIn(bad, 1, 10)) << bad;
  using nlohmann::json;
  EXPECT_EQ(JsonIntegerIn(json(7), 0, 10), 7);
  EXPECT_EQ(JsonIntegerIn(json(7.0), 0, 10), 7);
  EXPECT_EQ(JsonIntegerIn(json(kInt64Max), 0, kInt64Max), kInt64Max);  // exact, not via double
  EXPECT_EQ(JsonIntegerIn(json(kInt64Min), kInt64Min, 0), kInt64Min);
  for (const json& bad : {json(1e300), json(-1), json(11), json(2.5), json("7"), json(true),
                          json::array(), json(18446744073709551615ull)})
    EXPECT_FALSE(JsonIntegerIn(bad, 0, 10)) << bad.dump();
  EXPECT_EQ(ParseIntegerIn("-12", -20, 0), -12);
  EXPECT_EQ(ParseIntegerIn("9223372036854775807", 0, kInt64Max), kInt64Max);
  for (const char* bad : {"", " 1", "1 ", "+1", "1e3", "0x10", "9223372036854775808", "-", "11"})
    EXPECT_FALSE(ParseIntegerIn(bad, -10, 10)) << bad;
  EXPECT_EQ(ParseNumberIn("2.5e1", 0, 100), 25);
  for (const char* bad : {"inf", "nan", "1e400", " 1", "1x", "", "101", "-1"})
    EXPECT_FALSE(ParseNumberIn(bad, 0, 100)) << bad;
  EXPECT_EQ(RangeText(0, 1000000), "from 0 to 1,000,000");
  EXPECT_EQ(RangeText(kInt64Min, -1), "from -9,223,372,036,854,775,808 to -1");
}

// --- the simulator's documents ---

sim::KnowledgeBase Kb() {
  sim::KnowledgeBase kb;
  green::HardwareProfile d;
  d.name = "NVIDIA A100 SXM";
  d.kind = "gpu";
  d.tdp_w = 400;
  d.peak_tflops_16 = 312;
  kb.devices.push_back(d);
  kb.root = "/nonexistent";
  return kb;
}

std::string Model(const std::string& buckets, const std::string& batch = "8") {
  return R"({"format":"cdt-model-profile","version":1,"model":"m","parameters":1000,)"
         R"("bucket_bytes":)" +
         buckets + R"(,"compute":[{"batch":)" + batch + R"(,"forward_s":0.1,"backward_s":0.2}]})";
}

TEST(SimDocuments, HostileNumbersAreRefusedNamingFileAndField) {
  EXPECT_EQ(sim::ParseModelProfile(Model("[4e6]", "8.0"), "m.json").compute.at(0).batch, 8);
  // 1e300 bytes in a bucket became a size_t message size in the simulated allreduce.
  ExpectRefused([] { sim::ParseModelProfile(Model("[4e6,1e300]"), "m.json"); },
                "m.json: bucket_bytes: expected positive numbers of at most 10^16 bytes");
  ExpectRefused([] { sim::ParseModelProfile(Model("[4e6]", "8.5"), "m.json"); },
                "m.json: compute[0]: batch: expected an integer from 1 to 10,000,000");
  ExpectRefused(
      [] {
        sim::ParseClusterProfile(
            R"({"format":"cdt-cluster-profile","version":1,"nodes":2.5,"device":"host CPU",
                "host_cores":4})",
            "c.json", Kb());
      },
      "c.json: nodes: expected an integer from 1 to 100,000");
  ExpectRefused(
      [] {
        sim::ParseClusterProfile(
            R"({"format":"cdt-cluster-profile","version":1,"nodes":1,"device":"host CPU",
                "host_cores":1e300})",
            "c.json", Kb());
      },
      "c.json: host_cores: expected an integer from 1 to 1,000,000");
  // A job's result for `assess`: world_size 1e300 became an int.
  sim::AssessInputs in;
  in.job_json = R"({"world_size":1e300,"samples_per_s":10,"wall_s":5})";
  in.job_where = "job.json";
  ExpectRefused([&] { (void)sim::Assess(in); },
                "job.json: world_size: expected an integer from 1 to 102,400,000");
}

// --- the strategy cache and sysfs ---

TEST(StrategyCacheNumbers, AFileWithHostileNumbersIsIgnoredNamingTheField) {
  const fs::path dir = TempDir("cache");
  topology::ProbeResult probe;
  probe.shape.ranks_per_node = {2, 2};
  probe.has_intra = probe.has_inter = true;
  probe.intra = {"intra", 9.5, 4.25, 3.5};
  probe.inter = {"inter", 51, 0.126, 0};
  const std::string fp = topology::Fingerprint(probe.shape, "Ethernet", 10);
  topology::SaveStrategy(dir.string(), fp, probe, {});
  const std::string path = topology::StrategyPath(dir.string(), fp);
  nlohmann::json good;
  std::ifstream(path) >> good;
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* says;
  };
  const Case cases[] = {
      {"/version", 1e300, "another format or version"},
      {"/hierarchy/ranks_per_node/0", 1e300, "hierarchy.ranks_per_node: expected integers"},
      {"/hierarchy/ranks_per_node/0", -1, "hierarchy.ranks_per_node: expected integers"},
      {"/levels/0/beta_GBps", 1e300, "levels: intra: expected"},
  };
  std::string why;
  for (const Case& c : cases) {
    nlohmann::json doc = good;
    doc[nlohmann::json::json_pointer(c.pointer)] = c.value;
    std::ofstream(path, std::ios::trunc) << doc.dump();
    EXPECT_FALSE(topology::LoadStrategy(dir.string(), fp, &why)) << c.pointer;
    EXPECT_NE(why.find(c.says), std::string::npos) << c.pointer << ": " << why;
  }
  std::ofstream(path, std::ios::trunc) << good.dump();
  EXPECT_TRUE(topology::LoadStrategy(dir.string(), fp, &why)) << why;
  // A speed that is no number gives the "unknown" speed class, not log2(inf) as an int.
  EXPECT_EQ(topology::Fingerprint(probe.shape, "Ethernet", std::numeric_limits<double>::infinity()),
            topology::Fingerprint(probe.shape, "Ethernet", 0));
}

TEST(NicScanNumbers, SpeedsThatAreNoNumbersReadAsUnknown) {
  const fs::path sys = TempDir("sysfs");
  auto write = [&](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  };
  const char* speeds[] = {"inf", "1e400", "nan", "1e300", "0x7fffffff", "25000abc"};
  for (size_t i = 0; i < std::size(speeds); ++i) {
    const fs::path nic = sys / "class/net" / ("eth" + std::to_string(i));
    write(nic / "type", "1");
    write(nic / "speed", speeds[i]);
    write(nic / "operstate", "up");
  }
  write(sys / "class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand");
  write(sys / "class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
  write(sys / "class/infiniband/mlx5_0/ports/1/rate", "inf Gb/sec");
  const auto nics = topology::ScanNics(sys.string());
  ASSERT_EQ(nics.size(), std::size(speeds) + 1);
  for (const topology::NicInfo& n : nics) EXPECT_EQ(n.speed_gbps, 0) << n.name;
}

// --- green: hardware profiles, traces, runs, plans ---

TEST(GreenNumbers, HardwareThreadsOutOfRangeAreRefused) {
  testing::FakeFileSystem files;
  files.Put("/hw.json", R"({"devices":[{"name":"x","kind":"cpu","tdp_w":100,"threads":1e300}]})");
  ExpectRefused([&] { green::LoadHardwareProfiles("/hw.json", files); },
                "/hw.json: device 0: threads: expected an integer from 0 to 1,000,000");
  files.Put("/hw.json", R"({"devices":[{"name":"x","kind":"cpu","tdp_w":100,"threads":64}]})");
  EXPECT_EQ(green::LoadHardwareProfiles("/hw.json", files).at(0).threads, 64);
}

TEST(GreenNumbers, ADurationOfHugeHoursIsRefused) {
  for (const char* duration : {"99999999999:00:00", "1:99999999999:00", "-1:00:00", "1:00:00x"})
    ExpectRefused(
        [&] {
          green::ParseCarbonTrace(std::string(R"([{"time":"2022-01-01T00:00:00Z","rating":100,)") +
                                      R"("duration":")" + duration + "\"}]",
                                  "t.json", {});
        },
        "is neither hh:mm:ss");
  const green::CarbonTrace ok = green::ParseCarbonTrace(
      R"([{"time":"2022-01-01T00:00:00Z","rating":100,"duration":"00:30:00.000"}])", "t.json", {});
  EXPECT_EQ(ok.end_unix() - *green::ParseIsoTime("2022-01-01T00:00:00Z"), 1800);
}

TEST(GreenNumbers, ARunResultOutOfRangeIsRefusedNamingTheRunAndField) {
  green::RunResult r;
  r.total_steps = 100;
  r.steps = 30;
  r.wall_s = 10;
  EXPECT_NO_THROW(green::CheckRunResult(r, "calibration-1"));
  green::RunResult bad = r;
  bad.total_steps = kInt64Min;
  ExpectRefused([&] { green::CheckRunResult(bad, "calibration-1"); },
                "calibration-1 reported total_steps -9223372036854775808, expected an integer "
                "from 0 to 1,099,511,627,776");
  bad = r;
  bad.wall_s = 1e300;
  ExpectRefused([&] { green::CheckRunResult(bad, "run-2"); }, "run-2 reported wall_s 1e+300");
  bad = r;
  bad.samples = std::numeric_limits<double>::quiet_NaN();
  ExpectRefused([&] { green::CheckRunResult(bad, "run-2"); }, "run-2 reported samples nan");
}

// A job whose every run reports the given total_steps (as a damaged result file would).
class ResultOfSteps : public green::CarbonAwareJob {
 public:
  explicit ResultOfSteps(int64_t total) : total_(total) {}
  green::RunResult Run(const green::RunRequest&, const std::function<void()>&) override {
    green::RunResult r;
    r.steps = 30;
    r.total_steps = total_;
    r.wall_s = 3;
    r.samples = 30 * 64;
    return r;
  }
  std::string checkpoint_location() const override { return "memory"; }

 private:
  int64_t total_;
};

TEST(GreenNumbers, TheRunnerRefusesARunReportingHugeTotalSteps) {
  // INT64_MAX steps x 0.1 s became a deadline in hours converted to int.
  const green::CarbonTrace trace = green::CarbonTrace::Constant("test", "X", 100);
  testing::FakeClock clock;
  green::MeterSetOptions mo;
  mo.profiles_path = std::string(CDT_KNOWLEDGE_BASE) + "/hardware_profiles/devices.json";
  mo.try_hardware = false;
  green::MeterSet meter(mo);
  green::CarbonAwareOptions o;
  o.run_id = "test";
  for (int64_t total : {kInt64Max, kInt64Min}) {
    ResultOfSteps job(total);
    ExpectRefused(
        [&] {
          green::RunCarbonAware(job, trace, meter, clock, o,
                                [](const green::JobSpec&, double) { return green::Plans{}; });
        },
        "calibration-1 reported total_steps " + std::to_string(total));
  }
}

TEST(GreenNumbers, PlansAndTimesOutOfRangeAreRefusedOrSaidSo) {
  const green::CarbonTrace trace = green::CarbonTrace::Constant("test", "X", 100);
  green::JobSpec job;
  job.work = 1e300;
  job.scaling = {{1, 1, 1}};
  ExpectRefused([&] { green::PlanOnTrace(trace, 0, job, {}); },
                "needs more than the 87600 hours (10 years) a plan may cover");
  job.work = 2;
  job.deadline_hours = std::numeric_limits<int>::max();
  ExpectRefused([&] { green::PlanOnTrace(trace, 0, job, {}); }, "87600 hours");
  EXPECT_EQ(green::FormatIsoTime(1e300), "(time 1e+300: out of range)");
  EXPECT_EQ(green::FormatIsoTime(0), "1970-01-01T00:00:00Z");
  // A configured growth factor far past int: the batch is clamped, not converted.
  green::BatchControlConfig c;
  c.carbon_cap_kg = 1;
  c.grow = 1e300;
  c.low = 1e9;
  EXPECT_EQ(green::DecideBatch(c, 64, 0, 1000, 1e-6, 1).batch, c.max_batch);
}

// --- fault specs ---

TEST(FaultSpecNumbers, RanksAndStepsAreCheckedWholeAndInRange) {
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"kill:99999999999@1", "RANK must be an integer from 0 to 2,147,483,647"},
           {"kill: 1@1", "RANK must be an integer"},
           {"kill:+1@1", "RANK must be an integer"},
           {"kill:1@99999999999999999999", "STEP must be an integer from 0 to"},
           {"kill:1@-5", "STEP must be an integer"},
           {"slow:1=inf@3", "FACTOR must be a number from 1 to 1000"},
           {"cut:1@2+nan", "SECONDS must be a number above 0, at most 3600"},
       })
    ExpectRefused([&] { elastic::ParseFaults(spec); }, "--inject '" + spec + "': " + says);
  const auto f = elastic::ParseFaults("slow:3=2.5@9223372036854775807,cut:1@2+0.5");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].step, kInt64Max);
  EXPECT_EQ(f[0].factor, 2.5);
  EXPECT_EQ(f[1].factor, 0.5);
}

}  // namespace
}  // namespace cdt
