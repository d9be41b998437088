#include "cdt/error.h"

namespace cdt {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kPeerLost:
      return "peer lost";
    case ErrorCode::kAborted:
      return "aborted";
    case ErrorCode::kMismatch:
      return "collective mismatch";
    case ErrorCode::kStore:
      return "store error";
    case ErrorCode::kAuth:
      return "authentication failed";
    case ErrorCode::kProtocol:
      return "protocol error";
    case ErrorCode::kIo:
      return "I/O error";
    case ErrorCode::kDiverged:
      return "diverged";
  }
  return "unknown error";
}

Error::Error(ErrorCode code, const std::string& message, ErrorContext context)
    : std::runtime_error(message), code_(code), context_(std::move(context)) {}

}  // namespace cdt
