#include "dashboard/prometheus.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "cdt/error.h"

namespace cdt::dashboard {

namespace {

bool ValidName(const std::string& s, bool colon_allowed) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_allowed && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void Escape(const std::string& in, bool quote, std::string* out) {
  for (char c : in) {
    if (c == '\\')
      *out += "\\\\";
    else if (c == '\n')
      *out += "\\n";
    else if (quote && c == '"')
      *out += "\\\"";
    else
      *out += c;
  }
}

void Value(double v, std::string* out) {
  if (std::isnan(v)) {
    *out += "NaN";
  } else if (std::isinf(v)) {
    *out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    *out += buf;
  }
}

}  // namespace

std::string ExpositionText(const std::vector<MetricFamily>& families) {
  std::string out;
  std::set<std::string> seen;
  for (const MetricFamily& f : families) {
    const auto bad = [&f](const std::string& what) {
      return Error(ErrorCode::kInvalidArgument, "metric family '" + f.name + "': " + what);
    };
    if (!ValidName(f.name, true)) throw bad("not a valid metric name");
    if (!seen.insert(f.name).second) throw bad("written twice");
    if (f.type != "counter" && f.type != "gauge") throw bad("unknown type '" + f.type + "'");
    if (f.type == "counter" &&
        (f.name.size() < 6 || f.name.compare(f.name.size() - 6, 6, "_total") != 0))
      throw bad("a counter's name ends in _total");
    out += "# HELP " + f.name + " ";
    Escape(f.help, false, &out);
    out += "\n# TYPE " + f.name + " " + f.type + "\n";
    for (const Sample& s : f.samples) {
      out += f.name;
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          const auto& [name, value] = s.labels[i];
          if (!ValidName(name, false) || name.rfind("__", 0) == 0)
            throw bad("not a valid label name '" + name + "'");
          if (i) out += ',';
          out += name + "=\"";
          Escape(value, true, &out);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      Value(s.value, &out);
      out += '\n';
    }
  }
  return out;
}

}  // namespace cdt::dashboard
