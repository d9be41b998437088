#include "cdt/version.h"

namespace cdt {

const char* Version() { return CDT_VERSION; }

}  // namespace cdt
