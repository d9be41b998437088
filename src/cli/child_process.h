// Running this program's own verbs as child processes (green's training runs, profile's
// measurements): the child dies with its parent, `tick` runs every 200 ms while it works.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace cdt::cli {

// Runs `exe args...`, waits for it; its exit status (128 + signal when killed). `what` names it
// in the error thrown when it cannot be started.
int RunChild(const std::string& exe, const std::vector<std::string>& args,
             const std::function<void()>& tick, const std::string& what);

}  // namespace cdt::cli
