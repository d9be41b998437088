// The `cann-dashboard` binary (docs/dashboard.md): `cann-dashboard cluster [options]`.
#include <cstdio>
#include <exception>

#include "cdt/error.h"
#include "cli/dashboard_command.h"

int main(int argc, char** argv) {
  try {
    return cdt::cli::DashboardMain(argc, argv);
  } catch (const cdt::Error& e) {
    std::fprintf(stderr, "cann-dashboard: error (%s): %s\n", cdt::ErrorCodeName(e.code()),
                 e.what());
    return e.code() == cdt::ErrorCode::kInvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cann-dashboard: unexpected error: %s\n", e.what());
    return 1;
  }
}
