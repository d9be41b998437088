#include "comm/transport/sealed_stream.h"

#include <openssl/evp.h>
#include <sodium.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cdt/error.h"

namespace cdt::sealed {

namespace {

constexpr size_t kKeyBytes = 32;  // HMAC-SHA256 output: AES-256 and ChaCha20 keys alike
constexpr int kNonceBytes = 12;   // 96-bit nonces for both ciphers (GCM's and RFC 8439's)

// The frame's index as its 96-bit nonce (little-endian, zero-padded): never reused under a key,
// since every connection and direction has a key of its own.
void Nonce(uint64_t counter, unsigned char out[kNonceBytes]) {
  std::memset(out, 0, kNonceBytes);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(counter >> (8 * i));
}

void PutLength(uint32_t n, unsigned char out[kHeaderBytes]) {
  for (size_t i = 0; i < kHeaderBytes; ++i) out[i] = static_cast<unsigned char>(n >> (8 * i));
}

uint32_t GetLength(const unsigned char in[kHeaderBytes]) {
  uint32_t n = 0;
  for (size_t i = 0; i < kHeaderBytes; ++i) n |= static_cast<uint32_t>(in[i]) << (8 * i);
  return n;
}

bool Again() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

// A context holding `key`'s schedule for one direction (sealing or opening) of `cipher`.
CipherContext MakeContext(Cipher cipher, const std::string& key, bool seal) {
  if (key.size() != kKeyBytes)
    throw Error(ErrorCode::kInvalidArgument, "sealed stream: the key must be 32 bytes");
  CipherContext ctx(EVP_CIPHER_CTX_new());
  const EVP_CIPHER* type =
      cipher == Cipher::kAes256Gcm ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
  const auto* k = reinterpret_cast<const unsigned char*>(key.data());
  const bool ok =
      ctx &&
      (seal ? EVP_EncryptInit_ex(ctx.get(), type, nullptr, nullptr, nullptr)
            : EVP_DecryptInit_ex(ctx.get(), type, nullptr, nullptr, nullptr)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_IVLEN, kNonceBytes, nullptr) == 1 &&
      (seal ? EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, k, nullptr)
            : EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, k, nullptr)) == 1;
  if (!ok)
    throw Error(ErrorCode::kIo,
                std::string("sealed stream: OpenSSL could not set up ") + CipherName(cipher));
  return ctx;
}

}  // namespace

void CipherContextDeleter::operator()(evp_cipher_ctx_st* c) const { EVP_CIPHER_CTX_free(c); }

bool Aes256GcmAvailable() {
  // libsodium's probe of the CPU: AES-NI and carry-less multiplication (what fast GCM needs).
  if (sodium_init() < 0) return false;
  return crypto_aead_aes256gcm_is_available() != 0;
}

const char* CipherName(Cipher c) {
  return c == Cipher::kAes256Gcm ? "AES-256-GCM" : "ChaCha20-Poly1305";
}

SealedSender::SealedSender(Cipher cipher, std::string key)
    : ctx_(MakeContext(cipher, key, /*seal=*/true)) {}

void SealedSender::Seal(const unsigned char* p, size_t n) {
  frame_.resize(kHeaderBytes + n + kTagBytes);
  PutLength(static_cast<uint32_t>(n), frame_.data());
  unsigned char nonce[kNonceBytes];
  Nonce(counter_++, nonce);
  unsigned char* out = frame_.data() + kHeaderBytes;
  int len = 0, tail = 0;
  // Lengths fit an int: a frame is at most kMaxFramePlain. A failure here is OpenSSL's or an
  // exhausted machine's, not the input's: stop rather than send an unsealed frame.
  if (EVP_EncryptInit_ex(ctx_.get(), nullptr, nullptr, nullptr, nonce) != 1 ||
      EVP_EncryptUpdate(ctx_.get(), nullptr, &len, frame_.data(), kHeaderBytes) != 1 ||
      EVP_EncryptUpdate(ctx_.get(), out, &len, p, static_cast<int>(n)) != 1 ||
      EVP_EncryptFinal_ex(ctx_.get(), out + len, &tail) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_.get(), EVP_CTRL_AEAD_GET_TAG, static_cast<int>(kTagBytes),
                          out + n) != 1)
    throw Error(ErrorCode::kIo,
                "sealed stream: OpenSSL failed to seal frame #" + std::to_string(counter_ - 1));
  written_ = 0;
  frame_plain_ = n;
}

ssize_t SealedSender::Send(int fd, const void* p, size_t n) {
  moved_ = false;
  if (frame_plain_ == 0) {
    if (n == 0) return 0;
    Seal(static_cast<const unsigned char*>(p), std::min(n, kMaxFramePlain));
    frame_source_ = p;
  } else if (p != frame_source_) {
    errno = EINVAL;  // the caller moved on before its frame was out: a bug, not the network
    return -1;
  }
  while (written_ < frame_.size()) {
    const ssize_t r =
        ::send(fd, frame_.data() + written_, frame_.size() - written_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r > 0) {
      written_ += static_cast<size_t>(r);
      moved_ = true;
      continue;
    }
    if (r < 0 && Again()) {
      errno = EAGAIN;
      return -1;
    }
    return -1;  // errno says why
  }
  const size_t done = frame_plain_;
  frame_plain_ = 0;
  frame_source_ = nullptr;
  return static_cast<ssize_t>(done);
}

SealedReceiver::SealedReceiver(Cipher cipher, std::string key)
    : ctx_(MakeContext(cipher, key, /*seal=*/false)) {}

// The frame in body_ is complete: open it into `p` when it fits there, else into plain_. (Opened
// straight into `p`, a frame that fails its tag leaves unauthenticated bytes there: the operation
// fails, and a failed operation's buffer holds nothing anyone may use.)
ssize_t SealedReceiver::Open(void* p, size_t n) {
  unsigned char nonce[kNonceBytes];
  Nonce(counter_, nonce);
  const bool direct = n >= length_;
  unsigned char* out = static_cast<unsigned char*>(p);
  if (!direct) {
    plain_.resize(length_);
    plain_pos_ = 0;
    out = plain_.data();
  }
  int len = 0, tail = 0;
  const bool ok =
      EVP_DecryptInit_ex(ctx_.get(), nullptr, nullptr, nullptr, nonce) == 1 &&
      EVP_DecryptUpdate(ctx_.get(), nullptr, &len, header_, kHeaderBytes) == 1 &&
      EVP_DecryptUpdate(ctx_.get(), out, &len, body_.data(), static_cast<int>(length_)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx_.get(), EVP_CTRL_AEAD_SET_TAG, static_cast<int>(kTagBytes),
                          body_.data() + length_) == 1 &&
      EVP_DecryptFinal_ex(ctx_.get(), out + len, &tail) == 1;
  if (!ok) {
    failure_ = "frame #" + std::to_string(counter_) + " (" + std::to_string(length_) +
               " bytes) failed authentication: a byte changed on the wire, or the sender is not "
               "the peer this connection was keyed with";
    plain_.clear();
    plain_pos_ = 0;
    return -2;
  }
  ++counter_;
  const size_t frame = length_;
  length_ = 0;
  header_have_ = 0;
  body_have_ = 0;
  if (direct) return static_cast<ssize_t>(frame);
  std::memcpy(p, plain_.data(), n);
  plain_pos_ = n;
  return static_cast<ssize_t>(n);
}

ssize_t SealedReceiver::Recv(int fd, void* p, size_t n) {
  moved_ = false;
  if (n == 0) return 0;
  if (plain_pos_ < plain_.size()) {
    const size_t k = std::min(n, plain_.size() - plain_pos_);
    std::memcpy(p, plain_.data() + plain_pos_, k);
    plain_pos_ += k;
    if (plain_pos_ == plain_.size()) plain_.clear(), plain_pos_ = 0;
    return static_cast<ssize_t>(k);
  }
  for (;;) {
    unsigned char* into;
    size_t want;
    if (length_ == 0) {
      into = header_ + header_have_;
      want = kHeaderBytes - header_have_;
    } else {
      into = body_.data() + body_have_;
      want = length_ + kTagBytes - body_have_;
    }
    const ssize_t r = ::recv(fd, into, want, MSG_DONTWAIT);
    if (r == 0) return 0;  // closed, between frames or inside one: the peer is gone either way
    if (r < 0) {
      if (Again()) errno = EAGAIN;
      return -1;
    }
    moved_ = true;
    if (length_ == 0) {
      header_have_ += static_cast<size_t>(r);
      if (header_have_ < kHeaderBytes) continue;
      const uint32_t announced = GetLength(header_);
      if (announced == 0 || announced > kMaxFramePlain) {
        failure_ = "frame #" + std::to_string(counter_) + " announces " +
                   std::to_string(announced) + " bytes (1.." + std::to_string(kMaxFramePlain) +
                   " allowed): the stream is corrupt or not sealed";
        return -2;
      }
      length_ = announced;
      body_.resize(length_ + kTagBytes);
      body_have_ = 0;
      continue;
    }
    body_have_ += static_cast<size_t>(r);
    if (body_have_ < length_ + kTagBytes) continue;
    return Open(p, n);
  }
}

}  // namespace cdt::sealed
