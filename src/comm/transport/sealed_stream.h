// Sealed streams: the opt-in encrypted and authenticated data path of the TCP mesh (`--encrypt`,
// CDT_ENCRYPT=1; issue 41, item 10; docs/wire_format.md "Sealed frames"). Gloo ships a TLS
// transport for the same need; here the peer handshake already authenticates both ends and
// agrees a fresh key per connection (handshake::DataKey), so what is left is the framing and the
// AEAD: AES-256-GCM where both ends have AES-NI, else ChaCha20-Poly1305 (RFC 8439), both through
// OpenSSL's EVP interface — measured here at 5.1 and 4.8 GB/s a core on 64 KiB against libsodium's
// 2.3 and 1.5 (`openssl speed -evp`; docs/benchmarks.md, "The encrypted data path"), and the data
// path is bound by it.
//
// A mesh connection carries data one way, so each connection has a SealedSender at the dialer and
// a SealedReceiver at the listener. The byte stream becomes frames:
//   u32 length L (little-endian, 1 .. kMaxFramePlain)  |  AEAD(L bytes) + 16-byte tag
// with the length as associated data and the frame's index (a 64-bit counter, one per direction
// and connection) as the nonce: a frame changed, cut, dropped, replayed or reordered fails the tag.
// Frames never span two transfers of the sender, but a receiver may take one frame in several
// reads (the algorithms only agree on the byte stream), so undelivered plaintext waits in it.
//
// Both sides are driven non-blocking from TcpMesh::Exchange, like the plain sockets:
//   Send(fd, p, n) seals up to kMaxFramePlain bytes of [p, p+n) into a frame (once) and writes
//     what the socket takes; it returns the plaintext bytes whose frame is wholly written (so a
//     transfer completes only when its bytes are on the wire), else -1 with errno EAGAIN or the
//     socket's error. Until that frame is out, every call must pass the same p.
//   Recv(fd, p, n) hands out plaintext already opened, or reads the next frame and opens it
//     (straight into p when it fits); returns the bytes delivered, 0 when the peer closed, -1
//     with errno EAGAIN (or the socket's error), and -2 when a frame fails authentication or
//     announces an impossible length (the connection is then useless: the caller names the peer).
//   moved() says whether the last call moved any byte on the socket (the mesh's progress clock).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX, kept out of this header

namespace cdt::sealed {

constexpr size_t kHeaderBytes = 4;
constexpr size_t kTagBytes = 16;
constexpr size_t kMaxFramePlain = 64 << 10;  // 64 KiB: a syscall or two per frame, bounded memory

// The AEAD of a connection: AES-256-GCM when both ranks have the instructions for it (each says so
// in its address record), else ChaCha20-Poly1305.
enum class Cipher : uint8_t { kChaCha20Poly1305, kAes256Gcm };
bool Aes256GcmAvailable();  // AES-NI and carry-less multiply on this CPU
const char* CipherName(Cipher c);

// One direction's AEAD state: the key schedule is set up once, each frame sets its nonce.
struct CipherContextDeleter {
  void operator()(evp_cipher_ctx_st* c) const;
};
using CipherContext = std::unique_ptr<evp_cipher_ctx_st, CipherContextDeleter>;

class SealedSender {
 public:
  SealedSender(Cipher cipher, std::string key);
  ssize_t Send(int fd, const void* p, size_t n);
  bool moved() const { return moved_; }
  uint64_t frames() const { return counter_; }

 private:
  void Seal(const unsigned char* p, size_t n);
  CipherContext ctx_;
  std::vector<unsigned char> frame_;  // the frame being written, header first
  size_t written_ = 0;                // of frame_
  size_t frame_plain_ = 0;            // plaintext bytes in frame_ (0: no frame pending)
  const void* frame_source_ = nullptr;
  uint64_t counter_ = 0;  // frames sealed
  bool moved_ = false;
};

class SealedReceiver {
 public:
  SealedReceiver(Cipher cipher, std::string key);
  ssize_t Recv(int fd, void* p, size_t n);
  bool moved() const { return moved_; }
  uint64_t frames() const { return counter_; }
  // Why the last Recv returned -2: "frame #N (L bytes) failed authentication" or similar.
  const std::string& failure() const { return failure_; }
  // Plaintext opened but not yet handed out.
  size_t buffered() const { return plain_.size() - plain_pos_; }

 private:
  ssize_t Open(void* p, size_t n);
  CipherContext ctx_;
  unsigned char header_[kHeaderBytes] = {};
  size_t header_have_ = 0;
  size_t length_ = 0;                // of the frame being read (0: reading its header)
  std::vector<unsigned char> body_;  // ciphertext and tag of that frame
  size_t body_have_ = 0;
  std::vector<unsigned char> plain_;  // opened, not yet delivered: plain_[plain_pos_..]
  size_t plain_pos_ = 0;
  uint64_t counter_ = 0;  // frames opened
  bool moved_ = false;
  std::string failure_;
};

}  // namespace cdt::sealed
