#include "green/iso_time.h"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace cdt::green {
namespace {

bool Digits(std::string_view s, size_t at, size_t n, int* out) {
  if (at + n > s.size()) return false;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::optional<double> ParseIsoTime(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '"')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '"')) s.remove_prefix(1);
  std::tm tm{};
  int year, mon, day, hour = 0, min = 0, sec = 0;
  if (!Digits(s, 0, 4, &year) || s.size() < 10 || s[4] != '-' || !Digits(s, 5, 2, &mon) ||
      s[7] != '-' || !Digits(s, 8, 2, &day))
    return std::nullopt;
  if (mon < 1 || mon > 12 || day < 1 || day > 31) return std::nullopt;
  size_t at = 10;
  double frac = 0;
  if (at < s.size() && (s[at] == 'T' || s[at] == ' ')) {
    if (!Digits(s, at + 1, 2, &hour) || at + 3 >= s.size() + 0 || s[at + 3] != ':' ||
        !Digits(s, at + 4, 2, &min))
      return std::nullopt;
    at += 6;
    if (at < s.size() && s[at] == ':') {
      if (!Digits(s, at + 1, 2, &sec)) return std::nullopt;
      at += 3;
      if (at < s.size() && s[at] == '.') {
        double scale = 0.1;
        for (++at; at < s.size() && s[at] >= '0' && s[at] <= '9'; ++at, scale /= 10)
          frac += (s[at] - '0') * scale;
      }
    }
    if (hour > 23 || min > 59 || sec > 60) return std::nullopt;
  }
  int offset_s = 0;
  if (at < s.size()) {
    if (s[at] == 'Z' && at + 1 == s.size()) {
      at = s.size();
    } else if (s[at] == '+' || s[at] == '-') {
      int oh, om = 0;
      if (!Digits(s, at + 1, 2, &oh)) return std::nullopt;
      size_t m = at + 3;
      if (m < s.size() && s[m] == ':') ++m;
      if (m < s.size() && !Digits(s, m, 2, &om)) return std::nullopt;
      if (m < s.size()) m += 2;
      if (m != s.size()) return std::nullopt;
      offset_s = (s[at] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
    } else {
      return std::nullopt;
    }
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const time_t t = timegm(&tm);
  return static_cast<double>(t) - offset_s + frac;
}

std::string FormatIsoTime(double unix_s) {
  // Years 1 to 9999 only: a time computed from outside input (a trace's gap, a --start) may be
  // anything, and converting 1e300 to time_t is undefined.
  if (!(unix_s >= -62135596800.0 && unix_s < 253402300800.0)) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "(time %g: out of range)", unix_s);
    return buf;
  }
  const time_t t = static_cast<time_t>(std::floor(unix_s));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace cdt::green
