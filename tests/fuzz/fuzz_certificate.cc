// Certificate verification (green/certificate.h): a report and a certificate (JSON), split at the
// first NUL byte. A certificate may only verify for the report it signed.
#include "cdt/error.h"
#include "fuzz_util.h"
#include "green/certificate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [report, certificate] = cdt::fuzz::SplitAtNul(data, size);
  try {
    const auto v = cdt::green::VerifyCertificate(report, certificate, {"AAAA"});
    if (v.trusted) __builtin_trap();  // "AAAA" is no key: nothing can be signed by it
  } catch (const cdt::Error&) {
  }
  return 0;
}
