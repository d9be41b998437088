// The dashboard's token: what the page and its clients present to queue a fault
// (docs/dashboard.md, "Security"). It is derived from the job's secret and never is the secret:
// the secret keys the job's store and its mesh, so a token typed into a page, kept in a tab or
// carried in a link must not hand anyone the job. Knowing the token lets one queue faults through
// this dashboard; it tells nothing about the secret (HMAC-SHA256, a one-way function of it).
#pragma once

#include <string>
#include <string_view>

namespace cdt::dashboard {

// The label the token is bound to: a new scheme gets a new label, and old tokens stop opening.
inline constexpr char kTokenLabel[] = "cdt-dashboard-v1";

// 64 hex digits: HMAC-SHA256 keyed by SHA-256(secret) over (kTokenLabel, job_id), each part
// prefixed by its length as a 32-bit little-endian number — the construction of comm/auth.h's
// Hmac, written again here because the dashboard's layer does not see comm. Another job id gives
// another token. An empty secret gives "" (no token opens anything).
std::string DashboardToken(std::string_view secret, std::string_view job_id);

// Whether `given` equals `token`, in time that depends only on their lengths; "" never matches.
bool TokenMatches(std::string_view given, std::string_view token);

}  // namespace cdt::dashboard
