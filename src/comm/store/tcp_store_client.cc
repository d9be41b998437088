#include "comm/store/tcp_store_client.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "cdt/error.h"
#include "comm/auth.h"
#include "common/bytes.h"

namespace cdt {

using store::MsgType;

namespace {
constexpr auto kReplyMargin = std::chrono::seconds(5);  // server answers a Wait at its own deadline
}

TcpStoreClient::TcpStoreClient(const net::HostPort& server, const std::string& secret,
                               std::chrono::milliseconds connect_timeout,
                               std::chrono::milliseconds request_timeout)
    : server_(server),
      secret_(secret),
      where_("store at " + server.ToString()),
      request_timeout_(request_timeout) {
  Connect(net::DeadlineAfter(connect_timeout),
          std::max(connect_timeout, std::chrono::milliseconds(5000)));
}

void TcpStoreClient::Connect(net::Deadline deadline, std::chrono::milliseconds handshake_timeout) {
  // A store full of connections that have not authenticated (a flood: tcp_store_server.h) closes
  // one to make room, and a client slow to answer — a loaded machine — may be the one: a
  // connection closed before its handshake completed is tried again, with a growing pause, until
  // the deadline. A wrong secret is answered, not closed on (kAuthFailed): it is not retried.
  auto pause = std::chrono::milliseconds(10);
  for (int attempts = 1;; ++attempts) {
    try {
      ConnectOnce(deadline, handshake_timeout);
      return;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kPeerLost) throw;
      if (net::Clock::now() + pause >= deadline)
        throw Error(ErrorCode::kAuth, where_ + " closed the connection during authentication (" +
                                          e.what() + "; " + std::to_string(attempts) +
                                          " attempt(s)); is the job secret right?");
    }
    std::this_thread::sleep_for(pause + std::chrono::milliseconds(randombytes_uniform(10)));
    pause = std::min(2 * pause, std::chrono::milliseconds(200));
  }
}

void TcpStoreClient::ConnectOnce(net::Deadline deadline,
                                 std::chrono::milliseconds handshake_timeout) {
  try {
    sock_ = net::ConnectUntil(server_, deadline);
  } catch (const Error& e) {
    throw Error(ErrorCode::kTimeout,
                std::string("rendezvous: ") + e.what() +
                    "; check --rdzv-endpoint, CDT_STORE_ENDPOINT or MASTER_ADDR:MASTER_PORT");
  }
  net::SetNoDelay(sock_.fd());
  frames_ = store::FrameAuthenticator();
  net::Deadline hs = net::DeadlineAfter(handshake_timeout);
  try {
    char hello[store::kChallengeBytes];
    net::RecvAll(sock_.fd(), hello, sizeof hello, hs, where_);
    uint32_t magic, version;
    std::memcpy(&magic, hello, 4);
    std::memcpy(&version, hello + 4, 4);
    if (magic != store::kMagic)
      throw Error(ErrorCode::kProtocol, where_ + " is not a cann-dist-train store (bad magic)");
    if (version != store::kVersion)
      throw Error(ErrorCode::kProtocol, where_ + " speaks store protocol v" +
                                            std::to_string(version) + ", this build v" +
                                            std::to_string(store::kVersion) +
                                            ": run the same cann-dist-train on every node");
    const std::string client_nonce = auth::RandomBytes(store::kNonceBytes);
    store::Handshake h = store::DeriveHandshake(
        secret_, std::string_view(hello + 8, store::kNonceBytes), client_nonce);
    std::string frame;
    ByteWriter w(&frame);
    w.U32(store::kMaxAuthFrameBytes);
    w.U8(static_cast<uint8_t>(MsgType::kAuth));
    w.Raw(client_nonce.data(), client_nonce.size());
    w.Raw(h.client_proof.data(), h.client_proof.size());
    net::SendAll(sock_.fd(), frame.data(), frame.size(), hs, where_);
    uint32_t len;
    net::RecvAll(sock_.fd(), &len, 4, hs, where_);
    if (len == 0 || len > 1 + store::kProofBytes)
      throw Error(ErrorCode::kAuth, where_ + " answered authentication with a " +
                                        std::to_string(len) +
                                        "-byte frame: it is not this job's store");
    std::string body(len, '\0');
    net::RecvAll(sock_.fd(), body.data(), len, hs, where_);
    const auto type = static_cast<MsgType>(static_cast<uint8_t>(body[0]));
    if (type == MsgType::kAuthFailed)
      throw Error(ErrorCode::kAuth, where_ +
                                        " refused the job secret: every process of a job "
                                        "must get the same CDT_JOB_SECRET");
    // Mutual: the store must answer our nonce too, or it is not the job's (a process that
    // accepts any answer, or one relaying someone else's handshake).
    if (type != MsgType::kOk ||
        !auth::ConstantTimeEquals(std::string_view(body).substr(1), h.server_proof))
      throw Error(ErrorCode::kAuth,
                  where_ +
                      " could not prove it knows the job secret: it is not this job's store "
                      "(another service on that port, or an impostor); check --rdzv-endpoint "
                      "and CDT_JOB_SECRET");
    frames_ = store::FrameAuthenticator(std::move(h.session_key), /*server=*/false);
  } catch (const Error&) {
    sock_.Close();
    throw;
  }
}

std::pair<MsgType, std::string> TcpStoreClient::ReadFrame(net::Deadline deadline) {
  uint32_t len;
  net::RecvAll(sock_.fd(), &len, 4, deadline, where_);
  if (len < 1 + store::kFrameMacBytes || len > store::kMaxFrameBytes + 1 + store::kFrameMacBytes)
    throw Error(ErrorCode::kProtocol,
                where_ + " sent a frame of " + std::to_string(len) + " bytes");
  std::string body(len, '\0');
  net::RecvAll(sock_.fd(), body.data(), len, deadline, where_);
  MsgType type;
  std::string_view payload;
  try {
    payload = frames_.Open(body, &type);
  } catch (const Error& e) {
    throw Error(ErrorCode::kAuth, where_ + ": reply " + e.what() +
                                      "; something between us and the store alters the stream");
  }
  return {type, std::string(payload)};
}

std::pair<MsgType, std::string> TcpStoreClient::Request(MsgType type, const std::string& payload,
                                                        net::Deadline deadline) {
  if (!sock_.valid()) {
    // The last request failed half-way: connect again (the store may be back, or the link).
    try {
      // One short try: callers that want to wait for the store retry the request.
      Connect(std::min(deadline, net::DeadlineAfter(std::chrono::seconds(2))),
              std::chrono::seconds(2));
    } catch (const Error& e) {
      sock_.Close();
      throw Error(
          e.code() == ErrorCode::kAuth ? ErrorCode::kAuth : ErrorCode::kStore,
          where_ + ": the connection failed earlier and reconnecting failed too: " + e.what());
    }
  }
  std::string frame;
  frames_.Seal(&frame, type, payload);
  try {
    net::SendAll(sock_.fd(), frame.data(), frame.size(), deadline, where_);
    auto reply = ReadFrame(deadline);
    if (reply.first == MsgType::kError) {
      ByteReader r(reply.second, "store error reply");
      throw Error(ErrorCode::kStore, where_ + " rejected the request: " + r.Bytes(1 << 20));
    }
    return reply;
  } catch (const Error& e) {
    // A half-finished exchange leaves the stream out of step: never reuse it.
    sock_.Close();
    if (e.code() == ErrorCode::kStore || e.code() == ErrorCode::kAuth) throw;
    throw Error(e.code() == ErrorCode::kTimeout ? ErrorCode::kTimeout : ErrorCode::kStore,
                std::string("rendezvous store request failed: ") + e.what());
  }
}

void TcpStoreClient::Set(const std::string& key, const std::string& value) {
  std::string p;
  ByteWriter w(&p);
  w.Bytes(key);
  w.Bytes(value);
  std::lock_guard<std::mutex> lock(mu_);
  Request(MsgType::kSet, p, net::DeadlineAfter(request_timeout_));
}

void TcpStoreClient::WaitLocked(const std::vector<std::string>& keys,
                                std::chrono::milliseconds timeout) {
  std::string p;
  ByteWriter w(&p);
  w.U32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.Bytes(k);
  w.U64(static_cast<uint64_t>(timeout.count()));
  auto [type, payload] = Request(MsgType::kWait, p, net::DeadlineAfter(timeout + kReplyMargin));
  if (type == MsgType::kTimeout) {
    std::string names;
    for (size_t i = 0; i < keys.size() && i < 4; ++i) names += (i ? ", " : "") + keys[i];
    if (keys.size() > 4) names += ", ...";
    throw Error(ErrorCode::kTimeout, "waited " + std::to_string(timeout.count()) + " ms on " +
                                         where_ + " for keys [" + names +
                                         "]: some process of the job did not arrive");
  }
}

void TcpStoreClient::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  WaitLocked(keys, timeout);
}

std::string TcpStoreClient::Get(const std::string& key, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  WaitLocked({key}, timeout);
  std::string p;
  ByteWriter(&p).Bytes(key);
  auto [type, payload] = Request(MsgType::kGet, p, net::DeadlineAfter(request_timeout_));
  if (type != MsgType::kValue)
    throw Error(ErrorCode::kStore, where_ + ": key '" + key + "' vanished after wait");
  ByteReader r(payload, "store value");
  return r.Bytes(store::kMaxFrameBytes);
}

int64_t TcpStoreClient::Add(const std::string& key, int64_t delta) {
  std::string p;
  ByteWriter w(&p);
  w.Bytes(key);
  w.I64(delta);
  std::lock_guard<std::mutex> lock(mu_);
  auto [type, payload] = Request(MsgType::kAdd, p, net::DeadlineAfter(request_timeout_));
  ByteReader r(payload, "store add reply");
  return r.I64();
}

std::string TcpStoreClient::CompareSet(const std::string& key, const std::string& expected,
                                       const std::string& desired) {
  std::string p;
  ByteWriter w(&p);
  w.Bytes(key);
  w.Bytes(expected);
  w.Bytes(desired);
  std::lock_guard<std::mutex> lock(mu_);
  auto [type, payload] = Request(MsgType::kCompareSet, p, net::DeadlineAfter(request_timeout_));
  ByteReader r(payload, "store compare-set reply");
  return r.Bytes(store::kMaxFrameBytes);
}

bool TcpStoreClient::Delete(const std::string& key) {
  std::string p;
  ByteWriter(&p).Bytes(key);
  std::lock_guard<std::mutex> lock(mu_);
  auto [type, payload] = Request(MsgType::kDelete, p, net::DeadlineAfter(request_timeout_));
  ByteReader r(payload, "store delete reply");
  return r.U8() != 0;
}

bool TcpStoreClient::Check(const std::string& key) {
  std::string p;
  ByteWriter(&p).Bytes(key);
  std::lock_guard<std::mutex> lock(mu_);
  auto [type, payload] = Request(MsgType::kCheck, p, net::DeadlineAfter(request_timeout_));
  ByteReader r(payload, "store check reply");
  return r.U8() != 0;
}

}  // namespace cdt
