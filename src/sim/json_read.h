// Reading the simulator's JSON documents (model and cluster profiles, fault patterns, a job's
// result): typed field access whose errors name the document and the field, so that a user's
// hand-written profile fails with "cluster.json: nodes: expected a number >= 1", not with
// nlohmann's type_error. Every count becomes an integer through Integer(), which checks the range
// first: a profile's 1e300 is refused, not converted (undefined behaviour; issue 41).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "common/checked_number.h"

namespace cdt::sim {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}

  static nlohmann::json Parse(const std::string& text, const std::string& where) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw Error(ErrorCode::kInvalidArgument, where + ": not a JSON object");
    return j;
  }
  bool Has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  double Number(const char* key, double min, double fallback, bool required = false) const {
    if (!Has(key)) {
      if (required) Fail(key, "missing");
      return fallback;
    }
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number() || !(v.get<double>() >= min))
      Fail(key, "expected a number >= " + Short(min));
    return v.get<double>();
  }
  // A number from min to max (both kept: a profile's 1e300 is refused, not carried into the
  // simulation).
  double NumberIn(const char* key, double min, double max, double fallback,
                  bool required = false) const {
    const double v = Number(key, min, fallback, required);
    if (!(v <= max)) Fail(key, "expected a number from " + Short(min) + " to " + Short(max));
    return v;
  }
  // An integer field from min to max: a whole number (4 and 4.0 are 4; 4.5, 1e300 and "4" are
  // refused with the accepted range).
  int64_t Integer(const char* key, int64_t min, int64_t max, int64_t fallback,
                  bool required = false) const {
    if (!Has(key)) {
      if (required) Fail(key, "missing");
      return fallback;
    }
    const std::optional<int64_t> v = JsonIntegerIn(j_.at(key), min, max);
    if (!v) Fail(key, "expected an integer " + RangeText(min, max));
    return *v;
  }
  std::string String(const char* key, const std::string& fallback, bool required = false) const {
    if (!Has(key)) {
      if (required) Fail(key, "missing");
      return fallback;
    }
    if (!j_.at(key).is_string()) Fail(key, "expected a string");
    return j_.at(key).get<std::string>();
  }
  // An array field (empty when absent); each element read through a JsonReader named key[i].
  template <typename F>
  void Each(const char* key, F&& f) const {
    if (!Has(key)) return;
    const nlohmann::json& a = j_.at(key);
    if (!a.is_array()) Fail(key, "expected an array");
    for (size_t i = 0; i < a.size(); ++i)
      f(JsonReader(a[i], where_ + ": " + key + "[" + std::to_string(i) + "]"), a[i]);
  }
  JsonReader Object(const char* key) const {
    if (!Has(key) || !j_.at(key).is_object()) Fail(key, "expected an object");
    return JsonReader(j_.at(key), where_ + ": " + key);
  }
  const nlohmann::json& json() const { return j_; }
  const std::string& where() const { return where_; }
  [[noreturn]] void Fail(const std::string& key, const std::string& what) const {
    throw Error(ErrorCode::kInvalidArgument, where_ + ": " + key + ": " + what);
  }

 private:
  static std::string Short(double v) {
    if (std::abs(v) >= 1e12) {  // 1e+16, not 10000000000000000.000000
      char text[32];
      std::snprintf(text, sizeof text, "%g", v);
      return text;
    }
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace cdt::sim
