// CDT_CHECK: invariants whose violation means a bug in this program, not bad input.
// Prints both sides and aborts (LevelDB's assert / Gloo's GLOO_ENFORCE). Bad input throws
// cdt::Error.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace cdt::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* expr,
                                     const std::string& detail) {
  std::fprintf(stderr, "%s:%d: internal invariant violated: %s %s\n", file, line, expr,
               detail.c_str());
  std::abort();
}
template <typename A, typename B>
std::string Describe(const A& a, const B& b) {
  std::ostringstream out;
  out << "(" << a << " vs " << b << ")";
  return out.str();
}
}  // namespace cdt::internal

#define CDT_CHECK(cond)                                                       \
  do {                                                                        \
    if (!(cond)) ::cdt::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)
#define CDT_CHECK_OP(a, op, b)                                            \
  do {                                                                    \
    if (!((a)op(b)))                                                      \
      ::cdt::internal::CheckFailed(__FILE__, __LINE__, #a " " #op " " #b, \
                                   ::cdt::internal::Describe((a), (b)));  \
  } while (0)
#define CDT_CHECK_EQ(a, b) CDT_CHECK_OP(a, ==, b)
#define CDT_CHECK_LE(a, b) CDT_CHECK_OP(a, <=, b)
#define CDT_CHECK_LT(a, b) CDT_CHECK_OP(a, <, b)
