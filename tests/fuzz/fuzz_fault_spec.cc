// Fault specs (`--inject`, `fault-inject`; elastic/fault_spec.h).
#include "cdt/error.h"
#include "elastic/fault_spec.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const auto& f : cdt::elastic::ParseFaults(std::string(cdt::fuzz::AsText(data, size))))
      if (f.worker < 0 || f.step < 0) __builtin_trap();  // refused, never accepted
  } catch (const cdt::Error&) {
  }
  return 0;
}
