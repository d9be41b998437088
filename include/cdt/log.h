// The logging seam (issue 30): library code never prints; it writes through a Log it was given.
// A Log is a small value — a level, a prefix and a shared sink — so a component keeps its own
// copy (say ForRank(3)) and a test hands in a sink that collects the lines.
//
// Levels follow the usual four (glog, spdlog, Python's logging): error, warning, info, debug.
// The command line reads CDT_LOG_LEVEL (src/cli) and builds the Log every component gets; lines
// above that level are never formatted. Lines of a rank start "[rank3]: ", the prefix PyTorch
// and torchrun put on a worker's lines, so that the interleaved output of a job can be grepped.
//
// Why a sink of our own over fmt rather than spdlog (Debian's libspdlog-dev): spdlog's loggers
// live in a process-wide registry with a default logger, which is the global state this project
// keeps out of its libraries (STYLE.md); what is needed here — a level, a prefix and one write(2)
// per line so that the lines of threads and processes sharing a stderr do not interleave — is
// this file. The formatting is libfmt's (Debian's libfmt-dev), the library spdlog itself uses.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace cdt {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// "error", "warning" (or "warn"), "info", "debug", any case; nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(std::string_view name);
const char* LogLevelName(LogLevel level);

class Log {
 public:
  // Receives every line at or below the Log's level, prefix included, newline included (a
  // progress line: a leading '\r' and no newline). Called from any thread; must be thread-safe.
  using Sink = std::function<void(LogLevel level, std::string_view line)>;

  Log();  // info and above, to stderr
  explicit Log(LogLevel level, Sink sink = nullptr);  // nullptr: stderr

  // A copy whose lines start "[rank<rank>]: ".
  Log ForRank(int rank) const;
  LogLevel level() const { return level_; }
  bool Enabled(LogLevel level) const { return level <= level_; }

  template <typename... Args>
  void Error(fmt::format_string<Args...> format, Args&&... args) const {
    Emit(LogLevel::kError, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Warning(fmt::format_string<Args...> format, Args&&... args) const {
    Emit(LogLevel::kWarning, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Info(fmt::format_string<Args...> format, Args&&... args) const {
    Emit(LogLevel::kInfo, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Debug(fmt::format_string<Args...> format, Args&&... args) const {
    Emit(LogLevel::kDebug, format, std::forward<Args>(args)...);
  }

  // One line. A message that starts with '\r' or '\n' (it follows a progress line) keeps them in
  // front of the prefix.
  void Write(LogLevel level, std::string_view message) const;
  // A line that redraws itself (info): '\r', the prefix and `text`; a newline when `last`.
  void Progress(std::string_view text, bool last) const;

 private:
  template <typename... Args>
  void Emit(LogLevel level, fmt::format_string<Args...> format, Args&&... args) const {
    if (Enabled(level)) Write(level, fmt::format(format, std::forward<Args>(args)...));
  }

  LogLevel level_ = LogLevel::kInfo;
  std::string prefix_;
  std::shared_ptr<const Sink> sink_;
};

}  // namespace cdt
