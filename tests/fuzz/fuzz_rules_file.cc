// The allreduce rules file (CDT_ALLREDUCE_RULES; docs/allreduce_rules.md).
#include "cdt/allreduce_rules.h"
#include "cdt/error.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const cdt::AllreduceRules rules =
        cdt::AllreduceRules::Parse(std::string(cdt::fuzz::AsText(data, size)), "fuzz.rules");
    for (size_t bytes : {size_t{0}, size_t{4096}, size_t{1} << 30}) rules.Match(bytes, 2, 8);
  } catch (const cdt::Error&) {
  }
  return 0;
}
