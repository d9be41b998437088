// Numbers read from outside (a file, a reply, a flag) turned into integers only after a range
// check (issue 41, item 9).
//
// Converting a double to an integer type it does not fit is undefined behaviour, not a big
// number: `static_cast<size_t>(1e300)` from a hand-written profile, or `get<int>()` of a JSON
// 1e300, may yield anything (UBSan: "is outside the range of representable values"). A value is
// therefore checked while it is still a double (or text), and refused with an error naming the
// file, the field and RangeText(min, max) when it does not fit. Nothing here throws: callers
// own the message.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "common/check.h"

namespace cdt {

// Integers up to 2^53 in magnitude are exact as doubles; every bound given below must keep to
// them (a bound is a constant of the program, so a violation is a bug: CDT_CHECK).
inline constexpr int64_t kMaxExactInteger = int64_t{1} << 53;

// `v` as an int64 when it is a whole number from min to max (4.0 is 4); nullopt for a fraction,
// NaN, an infinity or anything out of range.
inline std::optional<int64_t> WholeNumberIn(double v, int64_t min, int64_t max) {
  CDT_CHECK(min >= -kMaxExactInteger && max <= kMaxExactInteger && min <= max);
  if (!(v >= static_cast<double>(min) && v <= static_cast<double>(max))) return std::nullopt;
  if (v != std::trunc(v)) return std::nullopt;
  return static_cast<int64_t>(v);  // in range: defined
}

// A JSON value (nlohmann::json, or anything with its number interface) as an int64 from min to
// max: an integer literal compared exactly, a float one through WholeNumberIn (so bounds past
// 2^53 are for integer literals only); nullopt for anything else.
template <typename Json>
std::optional<int64_t> JsonIntegerIn(const Json& v, int64_t min, int64_t max) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.template get<uint64_t>();
    if (max < 0 || u > static_cast<uint64_t>(max)) return std::nullopt;
    const auto i = static_cast<int64_t>(u);  // <= max: fits
    return i >= min ? std::optional<int64_t>(i) : std::nullopt;
  }
  if (v.is_number_integer()) {
    const int64_t i = v.template get<int64_t>();
    return i >= min && i <= max ? std::optional<int64_t>(i) : std::nullopt;
  }
  if (v.is_number_float())
    return WholeNumberIn(v.template get<double>(), std::max(min, -kMaxExactInteger),
                         std::min(max, kMaxExactInteger));
  return std::nullopt;
}

// The decimal integer that is all of `text` (an optional '-' then digits: no blanks, no '+', no
// "0x"), when it lies from min to max.
inline std::optional<int64_t> ParseIntegerIn(std::string_view text, int64_t min, int64_t max) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < min || v > max) return std::nullopt;
  return v;
}

// The finite decimal number that is all of `text` ("1.5", "2e3"; not "inf", "nan", " 1", "+1"),
// when it lies from min to max.
inline std::optional<double> ParseNumberIn(std::string_view text, double min, double max) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v) || !(v >= min) ||
      !(v <= max))
    return std::nullopt;
  return v;
}

// "from 1 to 100,000" for a message (thousands separated, as a user reads them).
inline std::string RangeText(int64_t min, int64_t max) {
  auto group = [](int64_t x) {
    const std::string digits = std::to_string(x < 0 ? -(x + 1) + 1ull : static_cast<uint64_t>(x));
    std::string out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return (x < 0 ? "-" : "") + out;
  };
  return "from " + group(min) + " to " + group(max);
}

}  // namespace cdt
