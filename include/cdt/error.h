// Typed errors of cann-dist-train.
//
// Policy (docs/errors.md): every failure a caller can act on is thrown as cdt::Error with a code
// that says where it came from, and a message that names who (this rank), whom (peer rank and
// address), what (operation and its sequence number) and what to do next. Broken internal
// invariants are not errors of this kind: they abort the process through CDT_CHECK
// (src/common/check.h) printing both values, because continuing would risk silently wrong
// gradients.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace cdt {

enum class ErrorCode {
  kInvalidArgument,  // caller passed something unusable (bad size, unknown dtype, bad flag)
  kTimeout,          // a peer or the store made no progress within the configured timeout
  kPeerLost,         // a peer closed or reset its connection (process died, link cut)
  kAborted,   // Communicator::Abort() was called, or an earlier failure broke the communicator
  kMismatch,  // ranks submitted different collectives at the same sequence number
  kStore,     // the rendezvous store failed or refused a request
  kAuth,      // wrong job secret or stale communicator generation
  kProtocol,  // malformed bytes on a store or peer connection
  kIo,        // any other operating-system failure (bind, listen, fork, ...)
  kDiverged,  // training produced a non-finite loss, or a compressor a non-finite residual
};

const char* ErrorCodeName(ErrorCode code);

// Context of a failed communication. Fields that do not apply keep their "unset" value
// (-1 for ranks, 0 for seq, empty strings).
struct ErrorContext {
  int rank = -1;             // this process's rank
  int peer_rank = -1;        // the peer involved, if any
  std::string peer_address;  // host:port of that peer
  std::string operation;     // e.g. "allreduce(ring)"
  uint64_t seq = 0;          // 1-based sequence number of the operation on its communicator
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, ErrorContext context = {});

  ErrorCode code() const { return code_; }
  const ErrorContext& context() const { return context_; }

 private:
  ErrorCode code_;
  ErrorContext context_;
};

}  // namespace cdt
