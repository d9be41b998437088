// The peer handshake of the TCP mesh, version 3 (docs/wire_format.md, "Peer handshake"): every
// connection of a mesh is authenticated both ways before it carries a byte of data, and all of a
// rank's connections, in and out, are handshaken concurrently in one poll loop, so a peer that
// connects and stays silent costs a pollfd, not the group's formation.
//
// The generation key K = HMAC(SHA-256(job secret), "cdt-mesh-v3", key prefix, token) binds the
// job, the generation (the key prefix is "<job>/gen<g>") and the token rank 0 drew for it. On
// every connection, dialer D and listener L exchange:
//   D -> L  Hello     { magic, version, from, to, channel, reserved, nonce_d[32] }        56 bytes
//   L -> D  Challenge { magic, status, nonce_l[32], HMAC(K, "listener", hello, nonce_l) } 72 bytes
//   D -> L  Proof     { HMAC(K, "dialer", hello, nonce_l) }                              32 bytes
//   L -> D  Ack       { magic, status }                                                  8 bytes
// Each side proves K over a nonce the other chose, so neither a replayed nor a relayed handshake
// passes, and L reveals nothing (its generation included) to a dialer that has not proven K.
// A listener holds at most kMaxPendingIncoming unproven connections (the oldest goes first).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cdt/log.h"
#include "comm/transport/socket.h"

namespace cdt::handshake {

constexpr uint32_t kMagic = 0x50544443;  // "CDTP"
constexpr uint32_t kVersion = 3;
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr size_t kTokenBytes = 16;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint32_t from_rank;
  uint32_t to_rank;
  uint32_t channel;
  uint32_t reserved;  // 0; keeps the struct free of implicit padding
  char nonce[kNonceBytes];
};
static_assert(sizeof(Hello) == 56, "Hello is a wire struct");
enum Status : uint32_t { kOk = 0, kBadProof = 1, kBadRank = 3, kBadVersion = 4 };
struct Challenge {
  uint32_t magic;
  uint32_t status;  // kOk, or why the hello is refused (then the connection closes)
  char nonce[kNonceBytes];
  char proof[kProofBytes];
};
static_assert(sizeof(Challenge) == 72, "Challenge is a wire struct");
struct Ack {
  uint32_t magic;
  uint32_t status;
};
static_assert(sizeof(Ack) == 8, "Ack is a wire struct");

// The generation key (see the header comment).
std::string GenerationKey(const std::string& secret, const std::string& key_prefix,
                          const std::string& token);

std::string ListenerProof(const std::string& key, const Hello& hello, const char* listener_nonce);
std::string DialerProof(const std::string& key, const Hello& hello, const char* listener_nonce);

// What a listener decides about a hello, before any proof: kOk, or why it is refused.
Status CheckHello(const Hello& h, int rank, int size, int channels);

// What a dialer makes of the listener's challenge to its `hello`: kOk with its own proof in
// *proof, or why it refuses the listener (kBadVersion: not a peer at all; kBadRank: the listener
// refused the hello, its status in *refused; kBadProof: the listener did not prove the key).
Status AnswerChallenge(const std::string& key, const Hello& hello, const Challenge& challenge,
                       std::string* proof, uint32_t* refused);

// Whether a dialer's proof (kProofBytes) answers the listener's nonce: kOk or kBadProof.
Status CheckProof(const std::string& key, const Hello& hello, const char* listener_nonce,
                  const char* proof);

struct MeshLinks {
  int rank = 0;
  int size = 1;
  int channels = 1;
  std::string key;                     // GenerationKey
  std::string who;                     // "rank R" for messages
  std::string label;                   // "generation G of job J" for messages
  std::vector<std::string> addresses;  // per rank, for messages
  Log log;                             // refused connections (warnings, at most one a second)
};

// Runs every handshake of one rank: `dialed[slot]` (slot = channel * size + peer; invalid at this
// rank) are connected sockets to the peers, whose Hello is sent here; connections arriving on
// `listener` are answered. Returns the accepted sockets by the same slot numbering. Throws
// cdt::Error: kAuth naming the peer if a peer cannot prove the key, kTimeout naming the ranks still
// missing at `deadline`.
std::vector<net::Socket> RunHandshakes(const MeshLinks& links, std::vector<net::Socket>& dialed,
                                       const net::Socket& listener, net::Deadline deadline);

constexpr size_t kMaxPendingIncoming = 64;

}  // namespace cdt::handshake
