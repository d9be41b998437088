// The peer handshake of the TCP mesh, version 4 (docs/wire_format.md, "Peer handshake"): every
// connection of a mesh is authenticated both ways before it carries a byte of data, and all of a
// rank's connections, in and out, are handshaken concurrently in one poll loop, so a peer that
// connects and stays silent costs a pollfd, not the group's formation.
//
// The generation key K = HMAC(SHA-256(job secret), "cdt-mesh-v4", key prefix, token) binds the
// job, the generation (the key prefix is "<job>/gen<g>") and the random token rank 0 drew for it
// (the generation's salt). Each rank also draws an X25519 key pair for the generation and
// publishes the public half with its address; a connection from dialer D to listener L is keyed by
//   LK = HMAC(K, "cdt-link-v4", X25519(D, L), pk_D, pk_L)
// which only the holder of the secret half of the published key of the rank D claims to be can
// compute. So a process that learned K — without a job secret K rests on the token alone, which
// anyone reading the store sees — still cannot take a rank's place: it lacks that rank's key.
// On every connection D and L exchange:
//   D -> L  Hello     { magic, version, from, to, channel, flags, nonce_d[32] }          56 bytes
//   L -> D  Challenge { magic, status, nonce_l[32], HMAC(LK, "listener", hello, nonce_l) } 72
//   D -> L  Proof     { HMAC(LK, "dialer", hello, nonce_l) }                             32 bytes
//   L -> D  Ack       { magic, status }                                                  8 bytes
// Each side proves LK over a nonce the other chose, so neither a replayed nor a relayed handshake
// passes, and L reveals nothing (its generation included) to a dialer that has not proven it.
// flags: kSealed — the connection's data travels in sealed frames (--encrypt,
// comm/transport/sealed_stream.h) under DataKey(LK, hello, nonce_l); both ends must agree.
// A listener holds at most kMaxPendingIncoming unproven connections beyond those it expects; when
// full, it drops the oldest of the source address that holds the most (comm/transport/admission.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cdt/log.h"
#include "comm/transport/socket.h"

namespace cdt::handshake {

constexpr uint32_t kMagic = 0x50544443;  // "CDTP"
constexpr uint32_t kVersion = 4;
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr size_t kTokenBytes = 16;
constexpr size_t kPublicKeyBytes = 32;  // X25519
constexpr size_t kSecretKeyBytes = 32;

// Hello.flags
constexpr uint32_t kSealed = 1;  // data in sealed frames (--encrypt)
constexpr uint32_t kKnownFlags = kSealed;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint32_t from_rank;
  uint32_t to_rank;
  uint32_t channel;
  uint32_t flags;  // kSealed or 0; unknown bits are refused
  char nonce[kNonceBytes];
};
static_assert(sizeof(Hello) == 56, "Hello is a wire struct");
enum Status : uint32_t { kOk = 0, kBadProof = 1, kBadRank = 3, kBadVersion = 4, kBadMode = 5 };
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

// A rank's key pair for one generation (X25519): the public half goes to the store with its
// address, the secret half never leaves the process.
struct RankKeys {
  std::string public_key;  // kPublicKeyBytes
  std::string secret_key;  // kSecretKeyBytes
  static RankKeys Generate();
};

// The generation key (see the header comment).
std::string GenerationKey(const std::string& secret, const std::string& key_prefix,
                          const std::string& token);

// The key of one connection (LK above): `my_secret` and `peer_public` give the X25519 agreement,
// which both ends compute alike. nullopt when `peer_public` is not a usable key (wrong size, or a
// point of small order whose agreement is all zeros): refuse the peer.
std::optional<std::string> LinkKey(const std::string& generation_key, const std::string& my_secret,
                                   const std::string& peer_public, const std::string& dialer_public,
                                   const std::string& listener_public);

std::string ListenerProof(const std::string& key, const Hello& hello, const char* listener_nonce);
std::string DialerProof(const std::string& key, const Hello& hello, const char* listener_nonce);
// The sealed-frame key of a connection (data flows dialer -> listener only): fresh per
// connection, as both nonces are in it.
std::string DataKey(const std::string& link_key, const Hello& hello, const char* listener_nonce);

// What a listener decides about a hello, before any proof: kOk, or why it is refused (kBadMode:
// the dialer's kSealed differs from `sealed`, ours).
Status CheckHello(const Hello& h, int rank, int size, int channels, bool sealed);

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
  std::string key;                       // GenerationKey
  RankKeys mine;                         // this rank's pair
  std::vector<std::string> public_keys;  // per rank, as published (kPublicKeyBytes each)
  bool sealed = false;                   // --encrypt: every connection carries sealed frames
  std::string who;                       // "rank R" for messages
  std::string label;                     // "generation G of job J" for messages
  std::vector<std::string> addresses;    // per rank, for messages
  Log log;                               // refused connections (warnings, at most one a second)
};

struct Handshaken {
  std::vector<net::Socket> accepted;  // by slot: the connections peers dialled (we receive on)
  // With MeshLinks::sealed, by slot: the DataKey of each connection we dialled (we send on) and of
  // each we accepted; empty strings otherwise.
  std::vector<std::string> send_keys, recv_keys;
};

// Runs every handshake of one rank: `dialed[slot]` (slot = channel * size + peer; invalid at this
// rank) are connected sockets to the peers, whose Hello is sent here; connections arriving on
// `listener` are answered. Throws cdt::Error: kAuth naming the peer if a peer cannot prove its
// link key, kProtocol for a peer whose published key is unusable or that runs another mode
// (--encrypt on one side only), kTimeout naming the ranks still missing at `deadline`.
Handshaken RunHandshakes(const MeshLinks& links, std::vector<net::Socket>& dialed,
                         const net::Socket& listener, net::Deadline deadline);

constexpr size_t kMaxPendingIncoming = 64;

}  // namespace cdt::handshake
