#include "green/carbon_sources.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "common/checked_number.h"
#include "common/printable.h"
#include "green/iso_time.h"
#include "green/text.h"

namespace cdt::green {
namespace {

[[noreturn]] void Bad(const std::string& path, size_t line, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument,
              path + (line ? ":" + std::to_string(line) : std::string()) + ": " + what);
}

std::string Trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  std::string t = s.substr(a, b - a);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
  return t;
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(Trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(Trim(cur));
  return out;
}

// nullopt for an empty field (a gap); throws for anything else that is not a finite number.
std::optional<double> Number(const std::string& field, const std::string& path, size_t line,
                             const std::string& column) {
  if (field.empty() || AsciiLower(field) == "nan" || AsciiLower(field) == "null")
    return std::nullopt;
  try {
    size_t used = 0;
    const double v = std::stod(field, &used);
    if (used != field.size() || !std::isfinite(v)) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    Bad(path, line, "column " + column + ": '" + Printable(field) + "' is not a number");
  }
}

// The longest stretch a trace may miss (between two rows, or of empty values) and still be filled
// by the gap policy.
constexpr double kMaxGapSeconds = 7 * 86400.0;
constexpr double kMaxFilledIntervals = 100000;  // however short the trace's interval

struct Row {
  double t = 0;
  std::optional<double> ci;
  double cfe = -1;
  size_t line = 0;
};

std::string RegionFromPath(const std::string& path) {
  std::string base =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  base = base.substr(0, base.find('.'));
  const size_t u = base.find('_');
  return u == std::string::npos ? base : base.substr(0, u);
}

// Rows sorted by time with equal spacing expected: fills missing values and missing rows by the
// policy, checks order, builds the trace.
CarbonTrace Assemble(std::vector<Row> rows, double interval_s, const std::string& path,
                     const TraceReadOptions& o, std::string region) {
  if (rows.empty()) Bad(path, 0, "no data rows");
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  std::vector<std::string> notes;
  // Missing intervals: insert empty rows where the spacing jumps by whole multiples.
  std::vector<Row> full;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].ci && o.gaps == GapPolicy::kFail)
      Bad(path, rows[i].line,
          "no intensity for " + FormatIsoTime(rows[i].t) + " (gap policy: fail)");
    if (i > 0) {
      const double gap = rows[i].t - rows[i - 1].t;
      // Filled row by row below: a gap of 8,000 years took 70 million rows (gigabytes) before.
      if (gap > kMaxGapSeconds || gap / interval_s > kMaxFilledIntervals)
        Bad(path, rows[i].line,
            "nothing from " + FormatIsoTime(rows[i - 1].t) + " to " + FormatIsoTime(rows[i].t) +
                ", longer than the " + std::to_string(static_cast<int>(kMaxGapSeconds / 86400)) +
                " days a trace may miss (docs/green.md); cut the trace or give the missing "
                "hours");
      const double n = std::round(gap / interval_s);
      if (n > 1 && std::abs(gap - n * interval_s) < 1e-6 * interval_s) {
        if (o.gaps == GapPolicy::kFail)
          Bad(path, rows[i].line,
              std::to_string(static_cast<long>(n) - 1) + " interval(s) missing before " +
                  FormatIsoTime(rows[i].t) + " (gap policy: fail)");
        for (long k = 1; k < static_cast<long>(n); ++k)
          full.push_back({rows[i - 1].t + k * interval_s, {}, -1, rows[i].line});
      }
    }
    full.push_back(rows[i]);
  }
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i].ci) continue;
    if (o.gaps == GapPolicy::kFail)
      Bad(path, full[i].line,
          "no intensity for " + FormatIsoTime(full[i].t) + " (gap policy: fail)");
    size_t j = i;
    while (j < full.size() && !full[j].ci) ++j;  // [i, j) is the gap
    if (static_cast<double>(j - i) * interval_s > kMaxGapSeconds)
      Bad(path, full[i].line,
          std::to_string(j - i) + " intervals without intensity from " + FormatIsoTime(full[i].t) +
              ", longer than the " + std::to_string(static_cast<int>(kMaxGapSeconds / 86400)) +
              " days a trace may miss (docs/green.md)");
    const bool has_before = i > 0, has_after = j < full.size();
    if (!has_before && !has_after) Bad(path, 0, "no intensity values at all");
    const double before = has_before ? full[i - 1].ci.value_or(0) : 0;
    const double after = has_after ? full[j].ci.value_or(0) : 0;
    for (size_t k = i; k < j; ++k) {
      double v;
      if (o.gaps == GapPolicy::kHoldPrevious || !has_after)
        v = has_before ? before : after;
      else if (!has_before)
        v = after;
      else
        v = before +
            (after - before) * static_cast<double>(k - i + 1) / static_cast<double>(j - i + 1);
      full[k].ci = v;
    }
    const std::string s =
        path + ":" + std::to_string(full[i].line) + ": " + std::to_string(j - i) +
        " interval(s) without intensity from " + FormatIsoTime(full[i].t) + ", " +
        (o.gaps == GapPolicy::kHoldPrevious ? "held the previous value" : "interpolated");
    notes.push_back(s);
    log(s);
    i = j - 1;
  }
  std::vector<CarbonInterval> out;
  out.reserve(full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    const double end = i + 1 < full.size() ? full[i + 1].t : full[i].t + interval_s;
    out.push_back({full[i].t, end, *full[i].ci, full[i].cfe});
  }
  CarbonTrace trace(path, region.empty() ? RegionFromPath(path) : region, std::move(out));
  trace.notes = std::move(notes);
  return trace;
}

double MedianSpacing(const std::vector<Row>& rows) {
  if (rows.size() < 2) return 3600;
  std::vector<double> d;
  for (size_t i = 1; i < rows.size(); ++i) d.push_back(rows[i].t - rows[i - 1].t);
  std::nth_element(d.begin(), d.begin() + static_cast<long>(d.size() / 2), d.end());
  return d[d.size() / 2];
}

void CheckOrder(const std::vector<Row>& rows, const std::string& path) {
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].t == rows[i - 1].t)
      Bad(path, rows[i].line,
          "duplicate timestamp " + FormatIsoTime(rows[i].t) + " (also on line " +
              std::to_string(rows[i - 1].line) + ")");
    if (rows[i].t < rows[i - 1].t)
      Bad(path, rows[i].line,
          "timestamp " + FormatIsoTime(rows[i].t) + " is earlier than line " +
              std::to_string(rows[i - 1].line) + "'s (the file must be in time order)");
  }
}

CarbonTrace ParseCsv(const std::string& text, const std::string& path, const TraceReadOptions& o) {
  std::istringstream in(text);
  std::string line;
  size_t n = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++n;
    if (!Trim(line).empty()) header = SplitCsv(line);
  }
  if (header.empty()) Bad(path, 0, "empty file");
  auto column = [&](std::initializer_list<const char*> names) -> int {
    for (size_t i = 0; i < header.size(); ++i)
      for (const char* name : names)
        if (AsciiLower(header[i]) == AsciiLower(name)) return static_cast<int>(i);
    return -1;
  };
  const size_t header_line = n;
  int ts = column({"timestamp", "time", "datetime"});
  const int dcrl = column({"avg_CI"});
  std::vector<std::string> header_notes;
  if (ts < 0 && dcrl >= 0 && header[0].empty()) {
    // pandas wrote its index without a name (dc-rl's WAAT file): the first column is the time.
    ts = 0;
    header_notes.push_back(path + ":" + std::to_string(header_line) +
                           ": the first column has no name; read as the timestamp");
    if (o.log) o.log(header_notes.back());
  }
  const int ci = !o.value_column.empty() ? column({o.value_column.c_str()})
                 : dcrl >= 0             ? dcrl
                             : column({"gco2_per_kwh", "carbon_intensity", "gco2/kwh", "rating"});
  if (ci < 0 && !o.value_column.empty())
    Bad(path, header_line,
        "missing column `" + o.value_column + "`; header is '" + Printable(line) + "'");
  if (ts < 0 || ci < 0)
    Bad(path, header_line,
        "missing column(s): need `timestamp` and `avg_CI` (dc-rl) or `gco2_per_kwh` (generic); "
        "header is '" +
            Printable(line) + "'");
  std::vector<int> clean, all;
  const char* fuels[] = {"WND", "SUN", "WAT", "OIL", "NG", "COL", "NUC", "OTH"};
  if (dcrl >= 0) {
    for (const char* f : fuels) {
      const int c = column({f});
      if (c < 0)
        Bad(path, header_line, std::string("missing column ") + f + " of the dc-rl format");
      all.push_back(c);
      if (std::string(f) == "WND" || std::string(f) == "SUN" || std::string(f) == "WAT" ||
          std::string(f) == "NUC")
        clean.push_back(c);
    }
  }
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    ++n;
    if (Trim(line).empty()) continue;
    const std::vector<std::string> f = SplitCsv(line);
    if (f.size() < header.size())
      Bad(path, n,
          std::to_string(f.size()) + " fields, the header has " + std::to_string(header.size()) +
              (in.eof() && !text.empty() && text.back() != '\n'
                   ? ": the file ends inside this line, cut short (an interrupted copy?)"
                   : ""));
    Row r;
    r.line = n;
    const std::optional<double> t = ParseIsoTime(f[static_cast<size_t>(ts)]);
    if (!t)
      Bad(path, n,
          "timestamp '" + Printable(f[static_cast<size_t>(ts)]) + "' is not an ISO 8601 time");
    r.t = *t;
    r.ci = Number(f[static_cast<size_t>(ci)], path, n, header[static_cast<size_t>(ci)]);
    if (r.ci && *r.ci < 0)
      Bad(path, n,
          "negative value " + f[static_cast<size_t>(ci)] + " in column " +
              header[static_cast<size_t>(ci)]);
    if (dcrl >= 0 && o.value_column.empty()) {
      double total = 0, free = 0;
      bool ok = true;
      for (int c : all) {
        const std::optional<double> v =
            Number(f[static_cast<size_t>(c)], path, n, header[static_cast<size_t>(c)]);
        if (!v)
          ok = false;
        else
          total += std::max(0.0, *v);
      }
      for (int c : clean) {
        const std::optional<double> v =
            Number(f[static_cast<size_t>(c)], path, n, header[static_cast<size_t>(c)]);
        if (v) free += std::max(0.0, *v);
      }
      if (ok && total > 0) r.cfe = free / total;
    }
    rows.push_back(r);
  }
  CheckOrder(rows, path);
  const double interval = MedianSpacing(rows);
  CarbonTrace trace = Assemble(std::move(rows), interval, path, o, o.region);
  trace.notes.insert(trace.notes.begin(), header_notes.begin(), header_notes.end());
  return trace;
}

double ParseDuration(const std::string& s, const std::string& path, size_t index) {
  // "HH:MM:SS[.s]", each field checked (sscanf's %d of "99999999999" is undefined behaviour).
  const size_t c1 = s.find(':'), c2 = c1 == std::string::npos ? c1 : s.find(':', c1 + 1);
  if (c2 != std::string::npos) {
    const std::string_view text(s);
    const auto h = ParseIntegerIn(text.substr(0, c1), 0, 168);
    const auto m = ParseIntegerIn(text.substr(c1 + 1, c2 - c1 - 1), 0, 10080);
    const auto sec = ParseNumberIn(text.substr(c2 + 1), 0, kMaxGapSeconds);
    if (h && m && sec && *h * 3600.0 + *m * 60.0 + *sec <= kMaxGapSeconds)
      return *h * 3600.0 + *m * 60.0 + *sec;
  }
  if (s.rfind("PT", 0) == 0) {
    double total = 0, v = 0;
    std::string num;
    for (size_t i = 2; i < s.size(); ++i) {
      if (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.') {
        num += s[i];
        continue;
      }
      // strtod, not stod: "." or a 400-digit number is a malformed duration, not an exception
      // (found by tests/fuzz/fuzz_carbon_json.cc: "PT.H" ended the process).
      char* end = nullptr;
      v = std::strtod(num.c_str(), &end);
      if (num.empty() || end != num.c_str() + num.size() || !std::isfinite(v)) break;
      num.clear();
      if (s[i] == 'H')
        total += v * 3600;
      else if (s[i] == 'M')
        total += v * 60;
      else if (s[i] == 'S')
        total += v;
      else
        break;
      if (i + 1 == s.size() && total <= kMaxGapSeconds) return total;  // an interval, not a gap
    }
  }
  Bad(path, 0,
      "element " + std::to_string(index) + ": duration '" + Printable(s) +
          "' is neither hh:mm:ss nor PT#H#M#S of at most 7 days");
}

CarbonTrace ParseCarbonAwareJson(const std::string& text, const std::string& path,
                                 const TraceReadOptions& o) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    Bad(path, 0, std::string("not JSON: ") + e.what());
  }
  if (doc.is_object() && doc.contains("emissionsData"))
    doc = doc["emissionsData"];  // forecast shape
  if (doc.is_object() && doc.contains("forecastData")) doc = doc["forecastData"];
  if (!doc.is_array()) Bad(path, 0, "expected an array of {location, time, rating, duration}");
  std::vector<Row> rows;
  std::vector<double> ends;
  std::string region = o.region;
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& e = doc[i];
    auto get = [&](const char* key) -> const nlohmann::json* {
      if (!e.is_object()) return nullptr;
      for (auto it = e.begin(); it != e.end(); ++it)
        if (AsciiLower(it.key()) == key) return &it.value();
      return nullptr;
    };
    const nlohmann::json *time = get("time"), *rating = get("rating"), *duration = get("duration"),
                         *loc = get("location");
    if (!time || !rating || !time->is_string())
      Bad(path, 0, "element " + std::to_string(i) + ": needs `time` (string) and `rating`");
    Row r;
    r.line = i + 1;
    const std::optional<double> t = ParseIsoTime(time->get<std::string>());
    if (!t)
      Bad(path, 0,
          "element " + std::to_string(i) + ": time '" + Printable(time->get<std::string>()) +
              "' is not ISO 8601");
    r.t = *t;
    if (rating->is_number()) {
      r.ci = rating->get<double>();
      if (*r.ci < 0) Bad(path, 0, "element " + std::to_string(i) + ": negative rating");
    } else if (!rating->is_null()) {
      Bad(path, 0, "element " + std::to_string(i) + ": rating is not a number");
    }
    ends.push_back(duration && duration->is_string()
                       ? ParseDuration(duration->get<std::string>(), path, i)
                       : 0);
    if (region.empty() && loc && loc->is_string()) region = loc->get<std::string>();
    rows.push_back(r);
  }
  for (size_t i = 0; i < rows.size(); ++i) rows[i].line = 0;  // JSON has no useful line numbers
  CheckOrder(rows, path);
  double interval = MedianSpacing(rows);
  if (rows.size() == 1 && ends[0] > 0) interval = ends[0];
  return Assemble(std::move(rows), interval, path, o, region);
}

}  // namespace

GapPolicy ParseGapPolicy(const std::string& name) {
  if (name == "fail") return GapPolicy::kFail;
  if (name == "interpolate") return GapPolicy::kInterpolate;
  if (name == "hold") return GapPolicy::kHoldPrevious;
  throw Error(ErrorCode::kInvalidArgument,
              "--gap-policy must be fail, interpolate or hold, not '" + name + "'");
}

CarbonTrace ParseCarbonTrace(const std::string& text, const std::string& path,
                             const TraceReadOptions& o) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) Bad(path, 0, "empty file");
  if (text[first] == '[' || text[first] == '{') return ParseCarbonAwareJson(text, path, o);
  return ParseCsv(text, path, o);
}

CarbonTrace ReadCarbonTrace(const std::string& path, const TraceReadOptions& o) {
  const std::string text = Or(o.fs).Read(path, kMaxTextFileBytes, "carbon trace",
                                         "give a trace file (docs/green.md, \"Traces\")");
  return ParseCarbonTrace(text, path, o);
}

CarbonTrace ConstantCarbonTrace(const std::string& region, const std::string& table_path) {
  const std::string text =
      LocalFileSystem().Read(table_path, kMaxTextFileBytes, "the annual-average table");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    Bad(table_path, 0, std::string("not JSON: ") + e.what());
  }
  const nlohmann::json& values = doc.contains("values") ? doc["values"] : doc;
  std::string key = region;
  for (char& c : key) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!values.contains(key) || !values[key].is_number())
    throw Error(ErrorCode::kInvalidArgument,
                "region '" + region + "' is not in " + table_path +
                    " (use an ISO 3166-1 alpha-3 code like FRA, or WORLD)");
  return CarbonTrace::Constant(table_path, key, values[key].get<double>());
}

}  // namespace cdt::green
