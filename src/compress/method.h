// The compressors by what they are (registry.h makes them). A name is parsed once, where it
// enters — a flag, an option of the library's API — and the code behind it switches on this.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cdt::compress {

enum class Method { kNone, kFp16, kBf16, kInt8, kTopK, kRandomK, kPowerSgd, kSignSgd };

std::optional<Method> ParseMethod(std::string_view name);
// ParseMethod, or cdt::Error(kInvalidArgument) "unknown <what> '<name>' (use none, fp16, ...)".
Method MethodNamed(const std::string& name, const std::string& what = "compressor");
const char* MethodName(Method method);

}  // namespace cdt::compress
