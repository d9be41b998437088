// A strict reader of the Prometheus text exposition format 0.0.4, for tests: what the dashboard's
// /metrics serves must pass it (docs/dashboard.md). Stricter than Prometheus itself where the
// format says SHOULD: one HELP and one TYPE per family, before its samples; families not
// interleaved; no sample repeated; counters named *_total, never negative. Throws
// std::runtime_error naming the line.
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cdt::test {

struct ParsedSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct ParsedFamily {
  std::string name, help, type;
  std::vector<ParsedSample> samples;
};

inline std::map<std::string, ParsedFamily> ParseExposition(const std::string& text) {
  std::map<std::string, ParsedFamily> families;
  std::string current;
  std::set<std::string> closed, seen_samples;
  int line_no = 0;
  const auto fail = [&line_no](const std::string& what, const std::string& line) {
    throw std::runtime_error("line " + std::to_string(line_no) + ": " + what + ": " + line);
  };
  const auto valid_name = [](const std::string& s, bool colon) {
    if (s.empty()) return false;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                      (colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
      if (!ok) return false;
    }
    return true;
  };
  if (!text.empty() && text.back() != '\n') throw std::runtime_error("no final newline");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) fail("empty line", line);
    if (line[0] == '#') {
      std::istringstream w(line);
      std::string hash, kind, name;
      w >> hash >> kind >> name;
      if (hash != "#" || (kind != "HELP" && kind != "TYPE"))
        fail("comment other than HELP/TYPE", line);
      if (!valid_name(name, true)) fail("bad metric name", line);
      if (closed.count(name)) fail("family continued after another began", line);
      if (name != current) {
        if (!current.empty()) closed.insert(current);
        current = name;
      }
      ParsedFamily& f = families[name];
      f.name = name;
      std::string rest;
      std::getline(w, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (kind == "HELP") {
        if (!f.help.empty()) fail("second HELP", line);
        if (!f.samples.empty()) fail("HELP after samples", line);
        f.help = rest;
      } else {
        if (!f.type.empty()) fail("second TYPE", line);
        if (!f.samples.empty()) fail("TYPE after samples", line);
        if (rest != "counter" && rest != "gauge" && rest != "histogram" && rest != "summary" &&
            rest != "untyped")
          fail("unknown type", line);
        if (rest == "counter" && (name.size() < 6 || name.substr(name.size() - 6) != "_total"))
          fail("counter not named *_total", line);
        f.type = rest;
      }
      continue;
    }
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    ParsedSample s;
    s.name = line.substr(0, i);
    if (!valid_name(s.name, true)) fail("bad sample name", line);
    if (s.name != current || !families.count(s.name) || families[s.name].type.empty())
      fail("sample without its family's TYPE just before", line);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) fail("label without =", line);
        const std::string label = line.substr(i, eq - i);
        if (!valid_name(label, false) || label.rfind("__", 0) == 0) fail("bad label name", line);
        if (eq + 1 >= line.size() || line[eq + 1] != '"') fail("label value not quoted", line);
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            if (++j >= line.size()) fail("dangling escape", line);
            if (line[j] == 'n')
              value += '\n';
            else if (line[j] == '\\' || line[j] == '"')
              value += line[j];
            else
              fail("bad escape", line);
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) fail("unterminated label value", line);
        if (!s.labels.emplace(label, value).second) fail("label repeated", line);
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) fail("unterminated label set", line);
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') fail("no value", line);
    const std::string v = line.substr(i + 1);
    if (v == "NaN") {
      s.value = NAN;
    } else if (v == "+Inf" || v == "-Inf") {
      s.value = v[0] == '+' ? INFINITY : -INFINITY;
    } else {
      char* end = nullptr;
      s.value = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') fail("value is not a float (or carries a timestamp)", line);
    }
    if (families[s.name].type == "counter" && !(s.value >= 0)) fail("negative counter", line);
    std::string key = s.name;
    for (const auto& [k, val] : s.labels) key += "|" + k + "=" + val;
    if (!seen_samples.insert(key).second) fail("sample repeated", line);
    families[s.name].samples.push_back(s);
  }
  for (const auto& [name, f] : families)
    if (f.help.empty() || f.type.empty())
      throw std::runtime_error("family " + name + " lacks HELP or TYPE");
  return families;
}

// The value of the sample of `family` with exactly these labels; throws when absent.
inline double SampleValue(const std::map<std::string, ParsedFamily>& families,
                          const std::string& family,
                          const std::map<std::string, std::string>& labels = {}) {
  auto f = families.find(family);
  if (f == families.end()) throw std::runtime_error("no family " + family);
  for (const ParsedSample& s : f->second.samples)
    if (s.labels == labels) return s.value;
  throw std::runtime_error("no sample of " + family + " with those labels");
}

}  // namespace cdt::test
