// The dashboard's server and its Prometheus text (src/dashboard): the exposition passes a strict
// parser, the page and assets are served, and every changing request without the dashboard token
// is refused (tests/unit/dashboard_hardening_test.cc: bounds, the token, TLS, hostile numbers). The
// live documents here are written as the workers write them (docs/dashboard.md);
// train/live_metrics_test.cc checks that the trainer's writer produces exactly this format.
#include <httplib.h>

#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "common/unix_time.h"
#include "dashboard/job_view.h"
#include "dashboard/prometheus.h"
#include "dashboard/server.h"
#include "dashboard/token.h"
#include "prometheus_parser.h"

namespace cdt::dashboard {
namespace {

std::string Document(int worker, int rank, int world, int64_t step, double now) {
  nlohmann::json d = {
      {"format", "cdt-live"},
      {"version", 1},
      {"worker_id", worker},
      {"rank", rank},
      {"world", world},
      {"generation", 0},
      {"step", step},
      {"end_step", 100},
      {"epoch", 0},
      {"finished", false},
      {"unix_time", now},
      {"wall_s", 2.0},
      {"steps", step + 1},
      {"samples", 32 * (step + 1)},
      {"samples_per_s", 16.0 * (step + 1)},
      {"loss", 0.5},
      {"test_accuracy", -1},
      {"loss_curve", {{step, 0.5}}},
      {"eval_curve", nlohmann::json::array()},
      {"step_time",
       {{"forward_s", 1.0}, {"backward_s", 2.0}, {"comm_wait_s", 0.5}, {"optimizer_s", 0.1}}},
      {"gradients",
       {{"bytes_fp32", 4000.0},
        {"bytes_wire", 1000.0},
        {"compress", "int8"},
        {"phases", nlohmann::json::array()},
        {"residual_pct", 3.0},
        {"overlap_ratio", 0.8},
        {"bucket_comm_s", {0.1}},
        {"bucket_wait_s", {0.02}}}},
      {"checkpoints",
       {{"written", 1},
        {"full", 1},
        {"file_bytes", 1e5},
        {"capture_s", 0.01},
        {"blocked_s", 0},
        {"encode_s", 0.02},
        {"write_s", 0.03}}},
      {"recoveries", nlohmann::json::array()},
      {"energy", {{"meter", "model"}, {"joules", 3600.0}}},
      {"comm",
       {{"allreduce", {{{"name", "ring"}, {"ops", 10}, {"bytes", 4000}, {"seconds", 0.2}}}},
        {"sent_bytes", std::vector<int>(static_cast<size_t>(world), 100)},
        {"received_bytes", std::vector<int>(static_cast<size_t>(world), 100)}}}};
  if (rank == 0)
    d["topology"] = {{"node_of_rank", std::vector<int>(static_cast<size_t>(world), 0)},
                     {"shares_memory", true},
                     {"algorithm_by_size", {{{"bytes", 1024}, {"algorithm", "hier"}}}}};
  return d.dump();
}

TEST(Prometheus, ExpositionPassesTheStrictParserWithEscapedLabels) {
  std::vector<MetricFamily> f = {
      {"cdt_a_total",
       "help with \\ backslash\nand newline",
       "counter",
       {{{{"worker", "0"}, {"why", "quote \" and \\ and\nnewline"}}, 3}}},
      {"cdt_b", "a gauge", "gauge", {{{}, -1.5}, {{{"x", "1"}}, 1e300}}}};
  const auto parsed = test::ParseExposition(ExpositionText(f));
  EXPECT_EQ(parsed.at("cdt_a_total").type, "counter");
  EXPECT_EQ(parsed.at("cdt_a_total").samples[0].labels.at("why"), "quote \" and \\ and\nnewline");
  EXPECT_DOUBLE_EQ(test::SampleValue(parsed, "cdt_b"), -1.5);
  EXPECT_DOUBLE_EQ(test::SampleValue(parsed, "cdt_b", {{"x", "1"}}), 1e300);
}

TEST(Prometheus, RefusesWhatAScraperWouldRefuse) {
  const auto refuses = [](MetricFamily f) { EXPECT_THROW(ExpositionText({f}), Error) << f.name; };
  refuses({"9starts_with_digit", "", "gauge", {}});
  refuses({"cdt_counter", "a counter not named _total", "counter", {}});
  refuses({"cdt_x", "", "histogram", {}});
  refuses({"cdt_x", "", "gauge", {{{{"bad-label", "v"}}, 1}}});
  refuses({"cdt_x", "", "gauge", {{{{"__reserved", "v"}}, 1}}});
  EXPECT_THROW(ExpositionText({{"cdt_x", "", "gauge", {}}, {"cdt_x", "", "gauge", {}}}), Error);
}

TEST(JobView, RefusesDocumentsThatAreNotLiveDocuments) {
  JobView v("job");
  const double now = UnixSeconds();
  EXPECT_THROW(v.Update(0, "not json", now), Error);
  EXPECT_THROW(v.Update(0, "[1,2]", now), Error);
  EXPECT_THROW(v.Update(0, R"({"format":"cdt-live","version":2})", now), Error);
  EXPECT_THROW(v.Update(1, Document(0, 0, 2, 5, now), now), Error);  // names another worker
  nlohmann::json d = nlohmann::json::parse(Document(0, 0, 2, 5, now));
  d["rank"] = 7;  // out of the world
  EXPECT_THROW(v.Update(0, d.dump(), now), Error);
  d = nlohmann::json::parse(Document(0, 0, 2, 5, now));
  d["comm"] = "x";
  EXPECT_THROW(v.Update(0, d.dump(), now), Error);
  EXPECT_TRUE(v.State(now)["workers"].empty());  // nothing of it kept
}

TEST(JobView, MetricsCarryEveryWorkersCountersAndTheJobs) {
  JobView v("job");
  const double now = UnixSeconds();
  v.Update(0, Document(0, 0, 2, 9, now), now);
  v.Update(1, Document(1, 1, 2, 9, now), now);
  const auto m = test::ParseExposition(ExpositionText(v.Metrics(now)));
  EXPECT_EQ(test::SampleValue(m, "cdt_samples_total"), 320);
  EXPECT_EQ(test::SampleValue(m, "cdt_world_size"), 2);
  EXPECT_EQ(test::SampleValue(m, "cdt_rank_steps_total", {{"worker", "1"}, {"rank", "1"}}), 10);
  EXPECT_EQ(test::SampleValue(m, "cdt_rank_step_seconds_total",
                              {{"worker", "0"}, {"rank", "0"}, {"phase", "backward"}}),
            2.0);
  EXPECT_EQ(test::SampleValue(m, "cdt_allreduce_bytes_total",
                              {{"worker", "0"}, {"rank", "0"}, {"algorithm", "ring"}}),
            4000);
  EXPECT_EQ(test::SampleValue(m, "cdt_transport_sent_bytes_total",
                              {{"worker", "0"}, {"rank", "0"}, {"peer", "1"}}),
            100);
  EXPECT_EQ(test::SampleValue(m, "cdt_compression_ratio", {{"worker", "1"}, {"rank", "1"}}), 4);
  EXPECT_EQ(test::SampleValue(m, "cdt_energy_joules_total"), 7200);  // both workers' joules
  EXPECT_EQ(test::SampleValue(m, "cdt_job_up", {{"job", "job"}}), 1);
}

TEST(JobView, CarbonIsEnergyTimesTheIntensityOfTheHourItWasUsed) {
  JobView v("job");
  const double now = UnixSeconds();
  CarbonSeries c;
  c.first_hour_unix = now - 1800;  // the current hour of the trace is its first
  c.g_per_kwh = {500, 100};
  v.SetCarbon(c);
  v.Update(0, Document(0, 0, 1, 1, now), now);  // 3600 J = 1 Wh at 500 g/kWh
  EXPECT_NEAR(v.State(now)["carbon"]["carbon_g"].get<double>(), 0.5, 1e-9);
}

class DashboardServer : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    o.secret = "s3cret-of-the-job";
    server_ = std::make_unique<Server>(view_, o, [this](const std::string& kind, int rank, double) {
      ++acted_;
      return kind + ":" + std::to_string(rank) + "@0";
    });
    server_->Start();
    const double now = UnixSeconds();
    view_.Update(0, Document(0, 0, 2, 3, now), now);
  }
  httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_connection_timeout(5);
    c.set_read_timeout(5);
    return c;
  }
  JobView view_{"job"};
  std::unique_ptr<Server> server_;
  std::atomic<int> acted_{0};
};

TEST_F(DashboardServer, ServesThePageItsAssetsTheStateAndStrictMetrics) {
  httplib::Client c = Client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("panel-topology"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  EXPECT_EQ(c.Get("/app.js")->status, 200);
  EXPECT_EQ(c.Get("/style.css")->status, 200);
  auto state = nlohmann::json::parse(c.Get("/api/state")->body);
  EXPECT_EQ(state["rank0"]["step"], 3);
  auto metrics = c.Get("/metrics");
  EXPECT_EQ(metrics->get_header_value("Content-Type"), kExpositionContentType);
  EXPECT_NO_THROW(test::ParseExposition(metrics->body));
}

TEST_F(DashboardServer, RefusesEveryChangeWithoutTheToken) {
  httplib::Client c = Client();
  const std::string body = R"({"kind":"kill","rank":2})";
  const std::string token = DashboardToken("s3cret-of-the-job", "cdt");
  auto none = c.Post("/api/fault", body, "application/json");
  EXPECT_EQ(none->status, 403);
  std::string wrong_token = token;
  wrong_token.back() = wrong_token.back() == '0' ? '1' : '0';
  auto wrong = c.Post("/api/fault", {{"X-CDT-Token", wrong_token}}, body, "application/json");
  EXPECT_EQ(wrong->status, 403);
  auto shorter =
      c.Post("/api/fault", {{"X-CDT-Token", token.substr(0, 32)}}, body, "application/json");
  EXPECT_EQ(shorter->status, 403);
  EXPECT_EQ(c.Put("/", "x", "text/plain")->status, 405);
  EXPECT_EQ(c.Delete("/api/state")->status, 405);
  EXPECT_EQ(c.Post("/api/state", "{}", "application/json")->status, 405);
  EXPECT_EQ(acted_.load(), 0);
  auto garbage = c.Post("/api/fault", {{"X-CDT-Token", token}}, "{not json", "application/json");
  EXPECT_EQ(garbage->status, 400);
  EXPECT_EQ(acted_.load(), 0);
  auto ok = c.Post("/api/fault", {{"X-CDT-Token", token}}, body, "application/json");
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(nlohmann::json::parse(ok->body)["queued"], "kill:2@0");
  EXPECT_EQ(acted_.load(), 1);
  const auto m = test::ParseExposition(c.Get("/metrics")->body);
  EXPECT_EQ(test::SampleValue(m, "cdt_dashboard_refused_requests_total"), 7);
  EXPECT_EQ(test::SampleValue(m, "cdt_dashboard_fault_requests_total"), 1);
}

TEST_F(DashboardServer, AnswersLoopbackNamesOnlyAgainstDnsRebinding) {
  httplib::Client c = Client();
  auto foreign = c.Get("/api/state", {{"Host", "attacker.example:8470"}});
  EXPECT_EQ(foreign->status, 403);
  auto local = c.Get("/api/state", {{"Host", "localhost:8470"}});
  EXPECT_EQ(local->status, 200);
}

TEST(DashboardToken, ComparesWholeTokensOnly) {
  EXPECT_TRUE(TokenMatches("abc", "abc"));
  EXPECT_FALSE(TokenMatches("abd", "abc"));
  EXPECT_FALSE(TokenMatches("ab", "abc"));
  EXPECT_FALSE(TokenMatches("", ""));  // no secret: nothing opens
}

}  // namespace
}  // namespace cdt::dashboard
