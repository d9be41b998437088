// Tagged point-to-point messages and receives from any source (cdt/point_to_point.h): ranks as
// threads over a MemoryStore and real loopback connections.
#include "cdt/point_to_point.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "comm/store/memory_store.h"

namespace cdt {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  int source = -1;
  std::optional<Error> error;
};

// A blocking call over the callback API.
Outcome Await(const std::function<void(PointToPoint::Done)>& post) {
  auto p = std::make_shared<std::promise<Outcome>>();
  std::future<Outcome> f = p->get_future();
  post([p](int source, const Error* e) {
    Outcome o;
    o.source = source;
    if (e) o.error = *e;
    p->set_value(o);
  });
  return f.get();
}

Outcome SendNow(PointToPoint& p, const std::string& data, int dst, int64_t tag) {
  return Await([&](PointToPoint::Done d) { p.Send(data.data(), data.size(), dst, tag, d); });
}

Outcome RecvNow(PointToPoint& p, std::string* into, int src, int64_t tag) {
  return Await([&](PointToPoint::Done d) { p.Recv(into->data(), into->size(), src, tag, d); });
}

void RunP2P(int size, const std::function<void(PointToPoint&, Store&)>& body,
            std::chrono::milliseconds timeout = 10s,
            const std::function<void(CommunicatorOptions&)>& tune = nullptr) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        CommunicatorOptions o;
        o.rank = r;
        o.size = size;
        o.timeout = timeout;
        if (tune) tune(o);
        auto p2p = CreatePointToPoint(store, o);
        body(*p2p, *store);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

TEST(PointToPoint, TagsPickTheirMessageWhateverTheOrderSent) {
  RunP2P(2, [](PointToPoint& p, Store&) {
    if (p.rank() == 0) {
      for (auto [tag, text] : {std::pair<int, std::string>{1, "one"}, {2, "two!"}, {3, "three"}})
        ASSERT_FALSE(SendNow(p, text, 1, tag).error);
      ASSERT_FALSE(SendNow(p, "", 1, 4).error);  // zero bytes are a message too
      return;
    }
    std::string three(5, '\0'), one(3, '\0'), two(4, '\0'), none;
    EXPECT_FALSE(RecvNow(p, &three, 0, 3).error);
    EXPECT_FALSE(RecvNow(p, &one, 0, 1).error);
    EXPECT_FALSE(RecvNow(p, &none, 0, 4).error);
    Outcome o = RecvNow(p, &two, 0, 2);
    EXPECT_FALSE(o.error);
    EXPECT_EQ(o.source, 0);
    EXPECT_EQ(three, "three");
    EXPECT_EQ(one, "one");
    EXPECT_EQ(two, "two!");
  });
}

TEST(PointToPoint, AReceiveFromAnySourceTakesEachSenderOnce) {
  // Rank 0 never names its peers: it learns of them from their bells.
  RunP2P(4, [](PointToPoint& p, Store&) {
    if (p.rank() != 0) {
      const std::string mine = "from " + std::to_string(p.rank());
      ASSERT_FALSE(SendNow(p, mine, 0, 7).error);
      return;
    }
    std::set<int> sources;
    for (int i = 0; i < 3; ++i) {
      std::string got(6, '\0');
      Outcome o = RecvNow(p, &got, PointToPoint::kAnySource, 7);
      ASSERT_FALSE(o.error) << o.error->what();
      EXPECT_EQ(got, "from " + std::to_string(o.source));
      sources.insert(o.source);
    }
    EXPECT_EQ(sources, (std::set<int>{1, 2, 3}));
  });
}

TEST(PointToPoint, TwoRanksSendEachOtherMegabytesBeforeEitherReceives) {
  // MPI_Send may block here; these sends do not wait for their receive (the peer keeps the bytes).
  RunP2P(2, [](PointToPoint& p, Store&) {
    const int peer = 1 - p.rank();
    std::string out(8 << 20, static_cast<char>('a' + p.rank())), in(8 << 20, '\0');
    ASSERT_FALSE(SendNow(p, out, peer, 0).error);
    ASSERT_FALSE(RecvNow(p, &in, peer, 0).error);
    EXPECT_EQ(in, std::string(8 << 20, static_cast<char>('a' + peer)));
  });
}

// Posts a send and returns at once; the future completes with its outcome.
std::future<Outcome> SendLater(PointToPoint& p, const std::string& data, int dst, int64_t tag) {
  auto done = std::make_shared<std::promise<Outcome>>();
  std::future<Outcome> f = done->get_future();
  p.Send(data.data(), data.size(), dst, tag, [done](int source, const Error* e) {
    Outcome o;
    o.source = source;
    if (e) o.error = *e;
    done->set_value(o);
  });
  return f;
}

TEST(PointToPoint, MessagesPastTheUnexpectedBudgetWaitUnreadForTheirReceive) {
  // A 1 MiB budget: two 512 KiB messages nobody receives yet are kept; the 4 MiB one after them
  // is not read (its send cannot complete: 64 KiB socket buffers on the bulk channel) until its
  // receive is posted, and then goes straight into it.
  const std::string a(512 << 10, 'a'), b(512 << 10, 'b'), big(4 << 20, 'c');
  RunP2P(
      2,
      [&](PointToPoint& p, Store& store) {
        if (p.rank() == 0) {
          ASSERT_FALSE(SendNow(p, "hi", 1, 0).error);  // forms the pair's connection
          ASSERT_FALSE(SendNow(p, a, 1, 1).error);
          ASSERT_FALSE(SendNow(p, b, 1, 2).error);
          std::future<Outcome> sent = SendLater(p, big, 1, 3);
          EXPECT_EQ(sent.wait_for(300ms), std::future_status::timeout)
              << "the receiver read a message past its budget";
          store.Set("post", "1");
          ASSERT_FALSE(sent.get().error);
          return;
        }
        std::string hi(2, '\0');
        ASSERT_FALSE(RecvNow(p, &hi, 0, 0).error);
        store.Get("post", 10s);
        std::string in3(4 << 20, '\0'), in1(512 << 10, '\0'), in2(512 << 10, '\0');
        ASSERT_FALSE(RecvNow(p, &in3, 0, 3).error);
        EXPECT_EQ(in3, big);
        ASSERT_FALSE(RecvNow(p, &in1, 0, 1).error);
        ASSERT_FALSE(RecvNow(p, &in2, 0, 2).error);
        EXPECT_EQ(in1, a);
        EXPECT_EQ(in2, b);
      },
      10s, [](CommunicatorOptions& o) { o.p2p_unexpected_max_bytes = 1 << 20; });
}

TEST(PointToPoint, AReceiveBehindAParkedMessageTimesOutSayingWhy) {
  // Rank 0 sends 2 MiB with tag 1 (past rank 1's 1 MiB budget, no receive yet), then tag 2. A
  // receive of tag 2 waits behind the parked message and times out naming it; the channel goes
  // on, and once tag 1's receive is posted both arrive. A wrong-sized receive for a parked
  // message fails alone and the bytes are dropped.
  const std::string big(2 << 20, 'x'), small = "small", after = "after";
  RunP2P(
      2,
      [&](PointToPoint& p, Store& store) {
        if (p.rank() == 0) {
          std::future<Outcome> s1 = SendLater(p, big, 1, 1);
          std::future<Outcome> s2 = SendLater(p, small, 1, 2);
          std::future<Outcome> s3 = SendLater(p, big, 1, 3);
          std::future<Outcome> s4 = SendLater(p, after, 1, 4);
          for (auto* f : {&s1, &s2, &s3, &s4}) EXPECT_FALSE(f->get().error);
          store.Set("done", "1");
          return;
        }
        std::string in2(small.size(), '\0');
        Outcome o = RecvNow(p, &in2, 0, 2);
        ASSERT_TRUE(o.error);
        EXPECT_EQ(o.error->code(), ErrorCode::kTimeout);
        EXPECT_NE(std::string(o.error->what())
                      .find("a message from rank 0 with tag 1 (2097152 bytes) waits ahead of it"),
                  std::string::npos)
            << o.error->what();
        std::string in1(2 << 20, '\0');
        ASSERT_FALSE(RecvNow(p, &in1, 0, 1).error);
        EXPECT_EQ(in1, big);
        ASSERT_FALSE(RecvNow(p, &in2, 0, 2).error);
        EXPECT_EQ(in2, small);
        std::string wrong(16, '\0'), in4(after.size(), '\0');
        o = RecvNow(p, &wrong, 0, 3);
        ASSERT_TRUE(o.error);
        EXPECT_EQ(o.error->code(), ErrorCode::kInvalidArgument);
        EXPECT_EQ(wrong, std::string(16, '\0'));
        ASSERT_FALSE(RecvNow(p, &in4, 0, 4).error);
        EXPECT_EQ(in4, after);
        store.Get("done", 10s);
      },
      10s,
      [](CommunicatorOptions& o) {
        o.p2p_unexpected_max_bytes = 1 << 20;
        if (o.rank == 1) o.timeout = 500ms;
      });
}

TEST(PointToPoint, AWrongSizeFailsThatReceiveAndTheChannelGoesOn) {
  RunP2P(2, [](PointToPoint& p, Store&) {
    if (p.rank() == 0) {
      ASSERT_FALSE(SendNow(p, "12345678", 1, 1).error);
      ASSERT_FALSE(SendNow(p, "ok", 1, 1).error);
      return;
    }
    std::string small(4, '\0'), next(2, '\0');
    Outcome o = RecvNow(p, &small, 0, 1);
    ASSERT_TRUE(o.error);
    EXPECT_EQ(o.error->code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(o.error->what()).find("8 bytes from rank 0"), std::string::npos)
        << o.error->what();
    EXPECT_EQ(small, std::string(4, '\0'));
    EXPECT_FALSE(RecvNow(p, &next, 0, 1).error);
    EXPECT_EQ(next, "ok");
  });
}

TEST(PointToPoint, AnUnmatchedReceiveTimesOutAloneAndWritesNothing) {
  RunP2P(
      2,
      [](PointToPoint& p, Store& store) {
        if (p.rank() == 0) {
          ASSERT_FALSE(SendNow(p, "a", 1, 1).error);
          store.Get("timed-out", 10s);
          ASSERT_FALSE(SendNow(p, "b", 1, 2).error);
          return;
        }
        std::string a(1, '\0'), never(1, 'x'), b(1, '\0');
        ASSERT_FALSE(RecvNow(p, &a, 0, 1).error);
        Outcome o = RecvNow(p, &never, 0, 9);
        ASSERT_TRUE(o.error);
        EXPECT_EQ(o.error->code(), ErrorCode::kTimeout);
        EXPECT_NE(std::string(o.error->what()).find("tag 9"), std::string::npos);
        EXPECT_EQ(never, "x");
        store.Set("timed-out", "1");
        ASSERT_FALSE(RecvNow(p, &b, 0, 2).error);
        EXPECT_EQ(b, "b");
      },
      400ms);
}

TEST(PointToPoint, ALostPeerFailsTheReceiveNamingIt) {
  RunP2P(2, [](PointToPoint& p, Store& store) {
    if (p.rank() == 0) {
      ASSERT_FALSE(SendNow(p, "hello", 1, 0).error);
      store.Get("received", 10s);
      return;  // the channel closes: its connections with it
    }
    std::string hello(5, '\0'), more(5, '\0');
    ASSERT_FALSE(RecvNow(p, &hello, 0, 0).error);
    store.Set("received", "1");
    Outcome o = RecvNow(p, &more, 0, 0);
    ASSERT_TRUE(o.error);
    EXPECT_EQ(o.error->code(), ErrorCode::kPeerLost) << o.error->what();
    EXPECT_NE(std::string(o.error->what()).find("rank 1 (this process) lost rank 0"),
              std::string::npos)
        << o.error->what();
    // Gone: a later operation naming it fails at once with the same cause.
    Outcome later = SendNow(p, "x", 0, 0);
    ASSERT_TRUE(later.error);
    EXPECT_EQ(later.error->code(), ErrorCode::kPeerLost);
    std::string unused(1, '\0');
    EXPECT_EQ(RecvNow(p, &unused, 0, 1).error->code(), ErrorCode::kPeerLost);
  });
}

TEST(PointToPoint, RefusesRanksOutsideTheGroup) {
  RunP2P(2, [](PointToPoint& p, Store&) {
    char b = 0;
    EXPECT_THROW(p.Send(&b, 1, p.rank(), 0, [](int, const Error*) {}), Error);
    EXPECT_THROW(p.Recv(&b, 1, 5, 0, [](int, const Error*) {}), Error);
  });
}

}  // namespace
}  // namespace cdt
