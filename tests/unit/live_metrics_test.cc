// The trainer's live document (train/live_metrics.h) is what the dashboard reads: every field the
// dashboard's JobView checks is there with its type, and the values reach /metrics unchanged.
#include "train/live_metrics.h"

#include <gtest/gtest.h>

#include "cdt/error.h"
#include "common/unix_time.h"
#include "dashboard/job_view.h"
#include "dashboard/prometheus.h"
#include "prometheus_parser.h"

namespace cdt::train {
namespace {

TEST(LiveMetrics, TheDashboardReadsWhatTheTrainerWrites) {
  LiveMetrics m;
  m.rank = 0;
  m.world = 2;
  m.worker_id = 3;
  m.generation = 1;
  m.step = 41;
  m.end_step = 100;
  m.unix_time = UnixSeconds();
  m.steps = 42;
  m.samples = 42 * 64;
  m.samples_per_s = 123.5;
  m.loss = 0.75;
  m.loss_tail = {{40, 0.8}, {41, 0.75}};
  m.step_time = {1.5, 3.0, 0.25, 0.125};
  m.bytes_fp32 = 8e6;
  m.bytes_wire = 2e6;
  m.compress = "int8";
  m.compression_phases = {{0, "warm-up", "none", 0}};
  TrainResult::Recovery r;
  r.cause = "peer lost";
  r.lost = {2};
  r.rto_s = 0.4;
  r.detected_after_s = 0.002;
  r.generation = 1;
  m.recoveries = {r};
  m.energy_j = 99;
  m.comm.allreduce = {{"hier", 7, 7000, 0.5}};
  m.comm.sent_bytes = {0, 1234};
  m.comm.received_bytes = {0, 4321};
  m.node_of_rank = {0, 0};
  m.shares_memory = true;
  m.algorithm_by_size = {{1024, "hier"}};

  dashboard::JobView v("job");
  v.Update(3, LiveMetricsJson(m), m.unix_time);
  const auto state = v.State(m.unix_time);
  EXPECT_EQ(state["rank0"]["recoveries"][0]["lost_workers"][0], 2);
  EXPECT_EQ(state["rank0"]["topology"]["algorithm_by_size"][0]["algorithm"], "hier");
  const auto p = test::ParseExposition(dashboard::ExpositionText(v.Metrics(m.unix_time)));
  const std::map<std::string, std::string> me = {{"worker", "3"}, {"rank", "0"}};
  EXPECT_EQ(test::SampleValue(p, "cdt_samples_total"), 42 * 64);
  EXPECT_EQ(test::SampleValue(p, "cdt_samples_per_second"), 123.5);
  EXPECT_EQ(test::SampleValue(p, "cdt_generation"), 1);
  EXPECT_EQ(test::SampleValue(p, "cdt_recoveries_total"), 1);
  EXPECT_EQ(test::SampleValue(p, "cdt_last_recovery_rto_seconds"), 0.4);
  EXPECT_EQ(test::SampleValue(p, "cdt_rank_steps_total", me), 42);
  auto with = [&me](std::string k, std::string v) {
    auto l = me;
    l[k] = v;
    return l;
  };
  EXPECT_EQ(test::SampleValue(p, "cdt_rank_step_seconds_total", with("phase", "comm_wait")), 0.25);
  EXPECT_EQ(test::SampleValue(p, "cdt_allreduce_ops_total", with("algorithm", "hier")), 7);
  EXPECT_EQ(test::SampleValue(p, "cdt_transport_received_bytes_total", with("peer", "1")), 4321);
  EXPECT_EQ(test::SampleValue(p, "cdt_gradient_bytes_total", with("kind", "wire")), 2e6);
  EXPECT_EQ(test::SampleValue(p, "cdt_rank_energy_joules_total", me), 99);
}

TEST(LiveMetrics, AFinishedJobsResultReplaysWithTheSameCounters) {
  TrainResult r;
  r.world_size = 3;
  r.steps = 200;
  r.total_steps = 200;
  r.samples = 200 * 96;
  r.wall_s = 10;
  r.started_unix = UnixSeconds() - 60;
  r.samples_per_s = 1920;
  r.final_loss = 0.3;
  r.loss_curve = {{0, 2.3}, {199, 0.3}};
  r.step_time = {4, 5, 1, 0.5};
  r.bytes_fp32 = 1e9;
  r.bytes_wire = 1e9;
  r.generation = 1;
  TrainResult::Recovery rec;
  rec.lost = {2};
  rec.rto_s = 0.25;
  rec.generation = 1;
  r.recoveries = {rec};
  r.energy.joules = 1234;
  dashboard::JobView v("job");
  v.Replay(TrainResultJson(r), "job.json", UnixSeconds());
  EXPECT_TRUE(v.FinalSeen());
  const auto p = test::ParseExposition(dashboard::ExpositionText(v.Metrics(UnixSeconds())));
  EXPECT_EQ(test::SampleValue(p, "cdt_samples_total"), 200 * 96);
  EXPECT_EQ(test::SampleValue(p, "cdt_world_size"), 3);
  EXPECT_EQ(test::SampleValue(p, "cdt_recoveries_total"), 1);
  EXPECT_EQ(test::SampleValue(p, "cdt_last_recovery_rto_seconds"), 0.25);
  EXPECT_EQ(test::SampleValue(p, "cdt_energy_joules_total"), 1234);
  EXPECT_EQ(test::SampleValue(p, "cdt_rank_steps_total", {{"worker", "0"}, {"rank", "0"}}), 200);
  EXPECT_THROW(v.Replay("{\"steps\": 1}", "other.json", UnixSeconds()), Error);
}

}  // namespace
}  // namespace cdt::train
