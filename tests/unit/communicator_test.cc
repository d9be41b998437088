// Failure semantics of the communicator, in process: silent peers time out naming the peer, Abort()
// unblocks at once, a broken communicator fails everything after, a new generation works on the
// same store, stale generations are refused, mismatched collectives are reported.
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <thread>
#include <vector>

#include "cdt/error.h"
#include "comm/transport/peer_handshake.h"
#include "comm/transport/send_pacing.h"
#include "comm/transport/socket.h"
#include "comm/transport/tcp_mesh.h"
#include "comm_test_util.h"

namespace cdt {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

CommunicatorOptions Opts(int rank, int size, uint64_t gen = 0, int timeout_ms = 1000) {
  CommunicatorOptions o;
  o.rank = rank;
  o.size = size;
  o.generation = gen;
  o.job_id = "t";
  o.timeout = milliseconds(timeout_ms);
  return o;
}

TEST(Communicator, OperationsCompleteInSubmissionOrder) {
  testing::RunRanks(3, [](Communicator& comm) {
    std::vector<std::vector<float>> bufs(20, std::vector<float>(1000, 1.0f));
    std::vector<std::shared_ptr<Work>> works;
    for (auto& b : bufs)
      works.push_back(comm.Allreduce(b.data(), b.size(), DataType::kFloat32, ReduceOp::kSum));
    for (auto& w : works) w->Wait();
    for (auto& b : bufs) EXPECT_EQ(b[999], 3.0f);
  });
}

// A small collective with nothing ahead of it runs on the calling thread (its Work is complete
// when the call returns); one submitted behind a queued operation waits its turn.
TEST(Communicator, SmallCollectivesRunOnTheCallersThreadInTheirTurn) {
  testing::RunRanks(3, [](Communicator& comm) {
    std::vector<float> small(16, 1.0f);
    auto w = comm.Allreduce(small.data(), small.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_TRUE(w->Completed());
    EXPECT_EQ(small[15], 3.0f);
    std::vector<float> big(1 << 18, 1.0f);  // 1 MiB: over inline_max_bytes, queued
    auto first = comm.Allreduce(big.data(), big.size(), DataType::kFloat32, ReduceOp::kSum);
    std::vector<float> gathered(3 * 16);
    auto second = comm.Allgather(small.data(), gathered.data(), small.size(), DataType::kFloat32);
    second->Wait();
    EXPECT_TRUE(first->Completed()) << "the small collective overtook the queued one";
    EXPECT_EQ(big[12345], 3.0f);
    for (float v : gathered) EXPECT_EQ(v, 3.0f);
    // Over and over, alternating with queued work, in every shape: the same results.
    for (int i = 0; i < 50; ++i) {
      std::vector<int32_t> v(1 + i % 7, comm.rank() + 1);
      std::vector<std::shared_ptr<Work>> works;
      if (i % 5 == 0)
        works.push_back(comm.Allreduce(big.data(), big.size(), DataType::kFloat32, ReduceOp::kMax));
      works.push_back(comm.Allreduce(v.data(), v.size(), DataType::kInt32, ReduceOp::kSum));
      works.push_back(comm.Barrier());
      for (auto& x : works) x->Wait();
      for (int32_t x : v) ASSERT_EQ(x, 6);
    }
  });
}

// Abort() from another thread ends a collective running on the caller's thread at once.
TEST(Communicator, AbortEndsACollectiveRunningOnTheCallersThread) {
  MemoryStore store;
  std::atomic<bool> done{false};
  std::thread silent([&] {
    auto comm = ConnectTcpCommunicator(store, Opts(1, 2, 0, 30000));
    while (!done) std::this_thread::sleep_for(milliseconds(10));  // never submits
  });
  auto comm = ConnectTcpCommunicator(store, Opts(0, 2, 0, 30000));
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    comm->Abort();
  });
  int32_t v = 1;
  const auto start = Clock::now();
  auto w = comm->Allreduce(&v, 1, DataType::kInt32, ReduceOp::kSum);  // runs here, blocks
  EXPECT_TRUE(w->Completed());
  EXPECT_THROW(w->Wait(), Error);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  aborter.join();
  done = true;
  silent.join();
}

// A yielding communicator hands no byte to the network while the gate is held, and it does not
// mistake the pause for a silent peer; it finishes once the gate is released. The urgent one runs
// while the other waits.
TEST(Communicator, YieldingCommunicatorPausesWhileTheGateIsHeld) {
  MemoryStore store;
  std::vector<std::shared_ptr<TrafficGate>> gates = {std::make_shared<TrafficGate>(),
                                                     std::make_shared<TrafficGate>()};
  std::vector<std::unique_ptr<Communicator>> bulk(2), urgent(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      CommunicatorOptions o = Opts(r, 2, 0, 300);  // pauses below are longer than the timeout
      o.traffic_gate = gates[static_cast<size_t>(r)];
      // The gate orders bytes on the network. Same-node ranks that share memory queue nothing
      // behind each other there, so their steps in shared memory do not wait for it: TCP only.
      o.shared_memory = false;
      // One thread below submits both ranks' collectives: none may run on the caller's thread.
      o.inline_max_bytes = 0;
      bulk[static_cast<size_t>(r)] = ConnectTcpCommunicator(store, o);
      o.job_id = "t/urgent";
      o.urgent = true;
      urgent[static_cast<size_t>(r)] = ConnectTcpCommunicator(store, o);
    });
  for (auto& t : ts) t.join();
  for (auto& g : gates) g->Enter();  // as if each rank's urgent side had bytes to send
  std::vector<std::vector<float>> big(2, std::vector<float>(1 << 20, 1.0f));
  std::vector<std::shared_ptr<Work>> works;
  for (int r = 0; r < 2; ++r)
    works.push_back(bulk[static_cast<size_t>(r)]->Allreduce(
        big[static_cast<size_t>(r)].data(), 1 << 20, DataType::kFloat32, ReduceOp::kSum));
  std::this_thread::sleep_for(milliseconds(600));
  for (auto& w : works) EXPECT_FALSE(w->Completed());
  // The urgent communicators are not held back by their own gate.
  std::vector<std::vector<float>> small(2, std::vector<float>(1000, 2.0f));
  std::vector<std::shared_ptr<Work>> quick;
  for (int r = 0; r < 2; ++r)
    quick.push_back(urgent[static_cast<size_t>(r)]->Allreduce(
        small[static_cast<size_t>(r)].data(), 1000, DataType::kFloat32, ReduceOp::kSum));
  for (auto& w : quick) w->Wait();
  EXPECT_EQ(small[1][999], 4.0f);
  for (auto& w : works) EXPECT_FALSE(w->Completed());
  for (auto& g : gates) g->Leave();
  for (auto& w : works) w->Wait();
  EXPECT_EQ(big[0][12345], 2.0f);
  EXPECT_EQ(big[1][(1 << 20) - 1], 2.0f);
}

// The yielding side's send buffer toward another host: twice the bandwidth-delay product TCP
// measured, between the floor and the cap; unchanged when the sample says nothing of the path.
TEST(SendPacing, BufferIsTwiceTheBandwidthDelayProductWithinItsBounds) {
  const auto at = [](double bytes_per_s, double rtt_s, bool app_limited = false) {
    net::PathSample s;
    s.valid = true;
    s.delivery_bytes_per_s = bytes_per_s;
    s.min_rtt_s = rtt_s;
    s.app_limited = app_limited;
    s.mss_bytes = 1448;  // Ethernet
    return net::PacedSendBuffer(s, 16 << 10, 64 << 10, 30000);
  };
  EXPECT_EQ(at(2.5e6, 100e-6), 16 << 10);     // 20 Mbit/s, 0.1 ms: the floor
  EXPECT_EQ(at(1.25e8, 100e-6), 25000);       // 1 Gbit/s, 0.1 ms
  EXPECT_EQ(at(1.25e9, 50e-6), 64 << 10);     // 10 Gbit/s, 50 us: the cap
  EXPECT_EQ(at(2.5e6, 100e-6, true), 30000);  // application-limited: keep what it is
  EXPECT_EQ(net::PacedSendBuffer(net::PathSample{}, 16 << 10, 64 << 10, 30000), 30000);
  net::PathSample fast{true, 1e6, 1e-3, false, 1448};
  EXPECT_EQ(net::PacedSendBuffer(fast, 64 << 10, 64 << 10, 30000),
            64 << 10);  // floor at the cap: fixed
  // A buffer that limits the rate itself (rate x RTT = buffer) doubles.
  EXPECT_EQ(at(20000 / 1e-3, 1e-3), 40000);
  // Never below eight segments: on loopback (64 KiB segments) that is above the cap.
  net::PathSample loopback{true, 2.5e6, 100e-6, false, 65483};
  EXPECT_EQ(net::PacedSendBuffer(loopback, 16 << 10, 64 << 10, 30000), 64 << 10);
  EXPECT_EQ(net::PacedSendBuffer(loopback, 16 << 10, 1 << 20, 30000), 8 * 65483);
}

// What the kernel reports of a loopback connection that carried a few megabytes.
TEST(SendPacing, TheKernelReportsRateAndRoundTrip) {
  net::HostPort bound;
  net::Socket listener = net::Listen("127.0.0.1", 0, &bound);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::thread sender([&] {
    net::Socket s = net::ConnectUntil(bound, deadline);
    std::vector<char> buf(4 << 20, 'x');
    net::SendAll(s.fd(), buf.data(), buf.size(), deadline, "receiver");
    const net::PathSample p = net::ReadPathSample(s.fd());
    EXPECT_TRUE(p.valid);
    EXPECT_GT(p.delivery_bytes_per_s, 0);
    EXPECT_GT(p.min_rtt_s, 0);
    EXPECT_LT(p.min_rtt_s, 1.0);
    EXPECT_GT(p.mss_bytes, 0);
    char done = 0;
    net::RecvAll(s.fd(), &done, 1, deadline, "receiver");
  });
  std::string peer;
  net::Socket r = net::AcceptUntil(listener, deadline, &peer);
  ASSERT_GE(r.fd(), 0);
  std::vector<char> buf(4 << 20);
  net::RecvAll(r.fd(), buf.data(), buf.size(), deadline, "sender");
  char done = 1;
  net::SendAll(r.fd(), &done, 1, deadline, "sender");
  sender.join();
  EXPECT_EQ(buf[(4 << 20) - 1], 'x');
  EXPECT_EQ(net::ReadPathSample(-1).valid, false);
}

// A yielding communicator between two "hosts" resizes its send buffers while bytes are in flight
// (on loopback the measured product is far from the 64 KiB default) and delivers every byte.
TEST(Communicator, YieldingSendBufferFollowsThePathAndKeepsEveryByte) {
  MemoryStore store;
  std::vector<std::unique_ptr<Communicator>> bulk(2), urgent(2);
  std::vector<std::shared_ptr<TrafficGate>> gates = {std::make_shared<TrafficGate>(),
                                                     std::make_shared<TrafficGate>()};
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      CommunicatorOptions o = Opts(r, 2, 0, 10000);
      o.host_id = r == 0 ? "host-a" : "host-b";
      o.traffic_gate = gates[static_cast<size_t>(r)];
      o.yield_send_buffer_bytes = 4 << 20;
      o.yield_send_buffer_min_bytes = 4 << 10;
      bulk[static_cast<size_t>(r)] = ConnectTcpCommunicator(store, o);
      o.job_id = "t/urgent";
      o.urgent = true;
      urgent[static_cast<size_t>(r)] = ConnectTcpCommunicator(store, o);
    });
  for (auto& t : ts) t.join();
  ts.clear();
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      for (int round = 0; round < 6; ++round) {
        const size_t count = size_t{3} << 20;
        std::vector<float> v(count, static_cast<float>(r + round));
        std::vector<float> small(999, 1.0f);
        auto w = bulk[static_cast<size_t>(r)]->Allreduce(v.data(), count, DataType::kFloat32,
                                                         ReduceOp::kSum);
        urgent[static_cast<size_t>(r)]
            ->Allreduce(small.data(), small.size(), DataType::kFloat32, ReduceOp::kSum)
            ->Wait();
        w->Wait();
        for (size_t i = 0; i < count; i += 4093)
          ASSERT_EQ(v[i], static_cast<float>(1 + 2 * round)) << round;
        ASSERT_EQ(v[count - 1], static_cast<float>(1 + 2 * round));
        ASSERT_EQ(small[998], 2.0f);
      }
    });
  for (auto& t : ts) t.join();
}

// Receives from another host sleep until a batch can be read at once (SO_RCVLOWAT), not per
// packet. A batch larger than the socket buffer can ever hold must still complete — the kernel
// wakes a reader whose receive window is full — and so must messages smaller than a batch.
TEST(Communicator, BatchedReceivesFromAnotherHostNeverStall) {
  for (int batch : {0, 1, 64 << 10, 64 << 20}) {
    testing::RankSetup setup;
    setup.host_ids = {"a", "b"};
    setup.base.remote_receive_batch_bytes = batch;
    setup.base.remote_socket_buffer_bytes = 64 << 10;  // fixed: SO_RCVLOWAT cannot grow it
    setup.base.timeout = std::chrono::seconds(10);     // a stall fails as kTimeout
    testing::RunRanks(
        2,
        [&](Communicator& comm) {
          for (size_t count : {size_t{0}, size_t{1}, size_t{1031}, size_t{3} << 20}) {
            for (AllreduceAlgorithm algo : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree}) {
              std::vector<float> v(count, static_cast<float>(comm.rank() + 1));
              comm.Allreduce(v.data(), count, DataType::kFloat32, ReduceOp::kSum, {algo})->Wait();
              for (size_t i = 0; i < count; ++i)
                ASSERT_EQ(v[i], 3.0f) << "batch " << batch << " count " << count;
            }
          }
        },
        setup);
  }
}

TEST(Communicator, SilentPeerTimesOutNamingPeerAndOperation) {
  MemoryStore store;
  std::atomic<bool> done{false};
  std::thread silent([&] {
    auto comm = ConnectTcpCommunicator(store, Opts(1, 2));
    while (!done) std::this_thread::sleep_for(milliseconds(10));  // never submits
  });
  auto comm = ConnectTcpCommunicator(store, Opts(0, 2));
  std::vector<float> buf(1000, 1.0f);
  auto start = Clock::now();
  try {
    comm->Allreduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum,
                    {AllreduceAlgorithm::kRing})
        ->Wait();
    FAIL() << "allreduce with a silent peer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_EQ(e.context().rank, 0);
    EXPECT_EQ(e.context().peer_rank, 1);
    EXPECT_EQ(e.context().seq, 1u);
    EXPECT_NE(std::string(e.what()).find("allreduce(ring) #1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:"), std::string::npos) << e.what();
  }
  auto took = Clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(3));
  // Everything after the failure fails fast with kAborted carrying the cause.
  try {
    comm->Barrier()->Wait();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAborted);
    EXPECT_NE(std::string(e.what()).find("earlier failure"), std::string::npos) << e.what();
  }
  done = true;
  silent.join();
}

TEST(Communicator, AbortUnblocksWaitersAtOnceAndNextGenerationWorks) {
  MemoryStore store;
  std::atomic<bool> done{false};
  std::thread silent([&] {
    auto comm = ConnectTcpCommunicator(store, Opts(1, 2, 0, 30000));
    while (!done) std::this_thread::sleep_for(milliseconds(10));
  });
  auto comm = ConnectTcpCommunicator(store, Opts(0, 2, 0, 30000));
  std::vector<float> buf(1 << 18, 1.0f);  // 1 MiB: queued, not run on this thread
  auto w1 = comm->Allreduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
  auto w2 = comm->Barrier();  // queued behind w1
  std::this_thread::sleep_for(milliseconds(200));
  auto start = Clock::now();
  comm->Abort();
  for (auto& w : {w1, w2}) {
    try {
      w->Wait(milliseconds(2000));
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kAborted) << e.what();
    }
  }
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  done = true;
  silent.join();
  comm.reset();

  // Generation 1 on the same store.
  testing::RankSetup setup;
  setup.base.generation = 1;
  setup.base.job_id = "t";
  testing::RunRanks(
      2,
      [](Communicator& c) {
        EXPECT_EQ(c.generation(), 1u);
        int32_t v = c.rank() + 1;
        c.Allreduce(&v, 1, DataType::kInt32, ReduceOp::kSum)->Wait();
        EXPECT_EQ(v, 3);
      },
      setup, &store);
}

// The X25519 public key in a rank's address record (tcp_mesh.h: its third line, hex).
std::string PublicKeyIn(const std::string& record) {
  const size_t a = record.find('\n'), b = record.find('\n', a + 1), c = record.find('\n', b + 1);
  const std::string hex = record.substr(b + 1, c - b - 1);
  std::string key;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    key += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return key;
}

TEST(Communicator, StaleGenerationAndForeignConnectionsAreRefused) {
  MemoryStore store;
  std::thread real;
  std::thread intruder([&] {
    // Act as a survivor of generation 0 dialling rank 0 of generation 1 (it knows the secret and
    // generation 1's token, but keys its proofs for generation 0), then as a stranger who knows
    // the token but not the secret.
    std::string v = store.Get("t/gen1/addr/0", milliseconds(5000));
    std::string token = store.Get("t/gen1/token", milliseconds(5000));
    auto hp = net::ParseHostPort(v.substr(0, v.find('\n')), "addr");
    // Keyed as rank 1 would be, but with a key pair of its own (it does not hold rank 1's).
    const std::string pk0 = PublicKeyIn(v);
    const handshake::RankKeys own = handshake::RankKeys::Generate();
    const std::string keys[2] = {
        *handshake::LinkKey(handshake::GenerationKey("job secret", "t/gen0", token), own.secret_key,
                            pk0, own.public_key, pk0),
        *handshake::LinkKey(handshake::GenerationKey("a guess", "t/gen1", token), own.secret_key,
                            pk0, own.public_key, pk0)};
    // Rank 0 answers only once every rank has published its address, so queue both intruders in
    // its backlog first, then let the real rank 1 join, then play the handshake.
    handshake::Hello h{handshake::kMagic, handshake::kVersion, 1, 0, 0, 0, {}};
    std::vector<net::Socket> socks;
    for (int i = 0; i < 2; ++i) {
      socks.push_back(net::ConnectUntil(hp, net::DeadlineAfter(milliseconds(2000))));
      net::SendAll(socks.back().fd(), &h, sizeof h, net::DeadlineAfter(milliseconds(2000)),
                   "rank 0");
    }
    real = std::thread([&] {
      CommunicatorOptions o = Opts(1, 2, 1, 5000);
      o.secret = "job secret";
      auto comm = ConnectTcpCommunicator(store, o);
      int32_t x = 5;
      comm->Allreduce(&x, 1, DataType::kInt32, ReduceOp::kSum)->Wait();
      EXPECT_EQ(x, 7);
    });
    for (int i = 0; i < 2; ++i) {
      handshake::Challenge ch{};
      net::RecvAll(socks[i].fd(), &ch, sizeof ch, net::DeadlineAfter(milliseconds(5000)), "rank 0");
      EXPECT_EQ(ch.status, handshake::kOk);
      // The listener proved a key the intruder does not hold ...
      EXPECT_NE(std::string(ch.proof, handshake::kProofBytes),
                handshake::ListenerProof(keys[i], h, ch.nonce));
      // ... and refuses the intruder's proof (or has formed its mesh and closed on it already).
      std::string proof = handshake::DialerProof(keys[i], h, ch.nonce);
      try {
        net::SendAll(socks[i].fd(), proof.data(), proof.size(),
                     net::DeadlineAfter(milliseconds(2000)), "rank 0");
        handshake::Ack ack{};
        net::RecvAll(socks[i].fd(), &ack, sizeof ack, net::DeadlineAfter(milliseconds(5000)),
                     "rank 0");
        EXPECT_EQ(ack.status, handshake::kBadProof);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kPeerLost) << e.what();
      }
    }
  });
  CommunicatorOptions o = Opts(0, 2, 1, 5000);
  o.secret = "job secret";
  auto comm = ConnectTcpCommunicator(store, o);
  int32_t v = 2;
  comm->Allreduce(&v, 1, DataType::kInt32, ReduceOp::kSum)->Wait();
  EXPECT_EQ(v, 7);  // rank 1's slot went to rank 1, not to an intruder
  intruder.join();
  real.join();
}

// Connections that say nothing cannot hold up the group: every handshake runs at once. (They were
// answered one at a time with 5 s each, so eight of them outlasted this 4 s timeout.)
TEST(Communicator, SilentConnectionsDoNotStallGroupFormation) {
  MemoryStore store;
  std::vector<net::Socket> silent;
  std::atomic<bool> squatting{false};
  std::thread squatter([&] {
    std::string v = store.Get("t/gen0/addr/0", milliseconds(5000));
    auto hp = net::ParseHostPort(v.substr(0, v.find('\n')), "addr");
    for (int i = 0; i < 8; ++i)
      silent.push_back(net::ConnectUntil(hp, net::DeadlineAfter(milliseconds(2000))));
    squatting = true;
  });
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      // Ranks 1 and 2 arrive once rank 0 has eight silent connections queued ahead of theirs.
      while (r > 0 && !squatting.load()) std::this_thread::sleep_for(milliseconds(1));
      auto comm = ConnectTcpCommunicator(store, Opts(r, 3, 0, 4000));
      int32_t x = r + 1;
      comm->Allreduce(&x, 1, DataType::kInt32, ReduceOp::kSum)->Wait();
      EXPECT_EQ(x, 6);
    });
  squatter.join();
  for (auto& t : ranks) t.join();
}

TEST(Communicator, MismatchedCollectivesAreReportedWithEveryRanksSubmission) {
  testing::RankSetup setup;
  setup.base.check_fingerprints = true;
  setup.base.timeout = milliseconds(5000);
  testing::RunRanks(
      3,
      [](Communicator& comm) {
        std::vector<float> buf(16, 1.0f);
        comm.Allreduce(buf.data(), 8, DataType::kFloat32, ReduceOp::kSum)
            ->Wait();  // matching: fine
        size_t count = comm.rank() == 2 ? 12 : 8;
        try {
          comm.Allreduce(buf.data(), count, DataType::kFloat32, ReduceOp::kSum)->Wait();
          ADD_FAILURE() << "mismatch not detected on rank " << comm.rank();
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kMismatch) << e.what();
          std::string m = e.what();
          EXPECT_NE(m.find("rank 2: allreduce #2 12 x f32 sum"), std::string::npos) << m;
          EXPECT_NE(m.find("rank 0: allreduce #2 8 x f32 sum"), std::string::npos) << m;
        }
      },
      setup);
}

TEST(Communicator, InvalidArgumentsAreRejectedAtSubmission) {
  testing::RunRanks(2, [](Communicator& comm) {
    int x = 0;
    EXPECT_THROW(comm.Broadcast(&x, 1, DataType::kInt32, 5), Error);
    EXPECT_THROW(comm.Send(&x, 4, comm.rank()), Error);
    EXPECT_THROW(comm.Allgatherv(&x, &x, {1}, DataType::kInt32), Error);
    for (const char* op : {"allgatherv", "reduce_scatter"}) {
      try {
        if (std::string(op) == "allgatherv")
          comm.Allgatherv(&x, &x, {1, 1, 1}, DataType::kInt32);
        else
          comm.ReduceScatter(&x, &x, {1}, DataType::kInt32, ReduceOp::kSum);
        ADD_FAILURE() << op << " took counts that do not match the world";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
        const size_t n = std::string(op) == "allgatherv" ? 3 : 1;
        EXPECT_EQ(std::string(e.what()), std::string(op) + ": counts has " + std::to_string(n) +
                                             " entries, the world has 2 ranks");
      }
    }
  });
}

}  // namespace
}  // namespace cdt

namespace cdt {
namespace {

// A timeout of centuries is a deadline that never comes, not one that wrapped into the past
// (issue 41, item 9: a --timeout over ~292 years overflowed DeadlineAfter).
TEST(Deadline, HugeAndNegativeTimeoutsSaturate) {
  const auto now = net::Clock::now();
  EXPECT_EQ(net::DeadlineAfter(std::chrono::milliseconds::max()), net::Deadline::max());
  EXPECT_GT(net::DeadlineAfter(std::chrono::hours(24 * 365 * 300)), now);
  const auto passed = net::DeadlineAfter(std::chrono::milliseconds(-5));
  EXPECT_LE(passed, net::Clock::now());
  EXPECT_EQ(net::MillisUntil(net::Deadline::max()), INT_MAX);
}

}  // namespace
}  // namespace cdt
