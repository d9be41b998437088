// ISO 8601 times in UTC, as carbon traces and the CLI write them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cdt::green {

// "2022-03-14T05:00:00Z", "2022-01-01 00:00:00+00:00", "2022-03-14T05:00Z",
// "2022-03-14T07:00:00+02:00" (offsets are applied), "2022-03-14" (midnight UTC). Fractional
// seconds are accepted. Returns Unix seconds, or nullopt when `text` is not such a time.
std::optional<double> ParseIsoTime(std::string_view text);

// "2022-03-14T05:00:00Z" (whole seconds, UTC); for a time outside years 1 to 9999 (or NaN),
// "(time 1e+300: out of range)" instead.
std::string FormatIsoTime(double unix_s);

}  // namespace cdt::green
