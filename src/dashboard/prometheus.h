// Prometheus text exposition format, version 0.0.4 (what Prometheus, Grafana Agent and
// VictoriaMetrics scrape; https://prometheus.io/docs/instrumenting/exposition_formats/): one
// `# HELP` and one `# TYPE` line per family, then its samples, label values escaped. Written by
// hand: the Debian archive has no C++ Prometheus client (prometheus-cpp is not packaged), and the
// format is a few lines of text.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace cdt::dashboard {

struct Sample {
  std::vector<std::pair<std::string, std::string>> labels;  // name, value (any UTF-8)
  double value = 0;
};

struct MetricFamily {
  std::string name;  // [a-zA-Z_:][a-zA-Z0-9_:]*; counters end in _total
  std::string help;
  std::string type;  // counter | gauge
  std::vector<Sample> samples;
};

// The exposition text of `families` in order. Throws cdt::Error(kInvalidArgument) on a bad
// metric or label name, an unknown type, a counter not named *_total or a family seen twice: a
// programming error here, not a scrape error in someone's Prometheus later.
std::string ExpositionText(const std::vector<MetricFamily>& families);

// Content-Type of the text format.
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace cdt::dashboard
