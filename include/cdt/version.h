// The engine's version, for programs built against the installed library (docs/library.md).
#pragma once

namespace cdt {

// "MAJOR.MINOR.PATCH" of the library this program runs with (CMake's project version).
const char* Version();

}  // namespace cdt
