// The logging seam: levels filter before formatting, a rank's lines carry its prefix, a line
// that follows a progress line keeps its '\r' in front, and the sink sees whole lines.
#include "cdt/log.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cdt::log_test {
// Counts how often it is formatted.
struct Counted {
  int* n;
};
}  // namespace cdt::log_test

template <>
struct fmt::formatter<cdt::log_test::Counted> : fmt::formatter<int> {
  auto format(const cdt::log_test::Counted& c, format_context& ctx) const {
    return fmt::formatter<int>::format(++*c.n, ctx);
  }
};

namespace cdt {
namespace {

using log_test::Counted;

struct Lines {
  std::mutex mu;
  std::vector<std::string> lines;
  Log::Sink Sink() {
    return [this](LogLevel, std::string_view line) {
      std::lock_guard<std::mutex> lock(mu);
      lines.emplace_back(line);
    };
  }
};

TEST(Log, ParsesTheFourLevelsAndRefusesTheRest) {
  EXPECT_EQ(ParseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(ParseLogLevel("WARNING"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("warn"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("Info"), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("verbose"), std::nullopt);
  EXPECT_EQ(ParseLogLevel(""), std::nullopt);
  for (LogLevel l : {LogLevel::kError, LogLevel::kWarning, LogLevel::kInfo, LogLevel::kDebug})
    EXPECT_EQ(ParseLogLevel(LogLevelName(l)), l);
}

TEST(Log, LinesAboveTheLevelAreNeitherWrittenNorFormatted) {
  Lines got;
  const Log log(LogLevel::kWarning, got.Sink());
  int formatted = 0;
  log.Error("e {}", 1);
  log.Warning("w {}", 2);
  log.Info("i {}", Counted{&formatted});
  log.Debug("d {}", Counted{&formatted});
  log.Progress("p", true);
  ASSERT_EQ(got.lines.size(), 2u);
  EXPECT_EQ(got.lines[0], "e 1\n");
  EXPECT_EQ(got.lines[1], "w 2\n");
  EXPECT_FALSE(log.Enabled(LogLevel::kInfo));
  EXPECT_EQ(formatted, 0);
}

TEST(Log, ARanksLinesCarryItsPrefixAfterALeadingCarriageReturn) {
  Lines got;
  const Log log = Log(LogLevel::kDebug, got.Sink()).ForRank(3);
  log.Info("compress: step {} residual {:.1f}%", 10, 2.25);
  log.Warning("\relastic: generation 1\n");
  log.Progress("step 1/2", false);
  log.Progress("step 2/2", true);
  ASSERT_EQ(got.lines.size(), 4u);
  EXPECT_EQ(got.lines[0], "[rank3]: compress: step 10 residual 2.2%\n");
  EXPECT_EQ(got.lines[1], "\r[rank3]: elastic: generation 1\n");
  EXPECT_EQ(got.lines[2], "\r[rank3]: step 1/2");
  EXPECT_EQ(got.lines[3], "\r[rank3]: step 2/2\n");
}

TEST(Log, CopiesShareTheSinkAcrossThreads) {
  Lines got;
  const Log log(LogLevel::kInfo, got.Sink());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([log, t] {
      const Log mine = log.ForRank(t);
      for (int i = 0; i < 100; ++i) mine.Info("line {}", i);
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(got.lines.size(), 400u);
  for (const auto& l : got.lines) {
    EXPECT_EQ(l.rfind("[rank", 0), 0u) << l;
    EXPECT_EQ(l.back(), '\n') << l;
  }
}

}  // namespace
}  // namespace cdt
