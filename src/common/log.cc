#include "cdt/log.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>

namespace cdt {

namespace {

// One write(2) per line (looping only on a short write), so that the lines of threads and of
// processes that share a stderr never interleave within a line. Errors are ignored: there is
// nowhere left to report them.
void WriteToStderr(LogLevel, std::string_view line) {
  while (!line.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    line.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "error") return LogLevel::kError;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "debug") return LogLevel::kDebug;
  return std::nullopt;
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "?";
}

Log::Log() : Log(LogLevel::kInfo) {}

Log::Log(LogLevel level, Sink sink)
    : level_(level), sink_(std::make_shared<const Sink>(sink ? std::move(sink) : WriteToStderr)) {}

Log Log::ForRank(int rank) const {
  Log copy = *this;
  copy.prefix_ = "[rank" + std::to_string(rank) + "]: ";
  return copy;
}

void Log::Write(LogLevel level, std::string_view message) const {
  if (!Enabled(level)) return;
  std::string line;
  line.reserve(prefix_.size() + message.size() + 2);
  while (!message.empty() && (message.front() == '\r' || message.front() == '\n')) {
    line += message.front();
    message.remove_prefix(1);
  }
  line += prefix_;
  line += message;
  if (line.empty() || line.back() != '\n') line += '\n';
  (*sink_)(level, line);
}

void Log::Progress(std::string_view text, bool last) const {
  if (!Enabled(LogLevel::kInfo)) return;
  std::string line = "\r" + prefix_;
  line += text;
  if (last) line += '\n';
  (*sink_)(LogLevel::kInfo, line);
}

}  // namespace cdt
