// EtcdStore (src/comm/store/etcd_store.h) against an etcd that misbehaves (issue 41, item 7): a
// fake server (tests/common/fake_etcd.h) answers garbage, empty bodies, JSON of the wrong shape,
// bad base64, replies too long or too slow, and transactions that never succeed. Every call must
// fail with cdt::Error(kStore) naming the server and the key — never another exception — at the
// first bad reply, and the retry loops must end on their bounds. Deadlines are checked by
// counting what reached the server, never by timing the call.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cdt/error.h"
#include "comm/store/etcd_reply.h"
#include "comm/store/etcd_store.h"
#include "fake_etcd.h"

namespace cdt {
namespace {

using std::chrono::milliseconds;
using testing::FakeEtcd;

const std::string kKey = "job/n";       // every test's key
const std::string kKey64 = "am9iL24=";  // its base64
const std::string kHeader = FakeEtcd::kHeader;

std::string Obj(const std::string& members) { return "{" + kHeader + members + "}"; }
// A range reply holding kKey with `value` (base64) at mod revision `rev` (JSON text).
std::string Found(const std::string& value64, const std::string& rev = "\"5\"") {
  return Obj(R"(,"kvs":[{"key":")" + kKey64 + R"(","create_revision":"2","mod_revision":)" + rev +
             R"(,"version":"1","value":")" + value64 + R"("}],"count":"1")");
}

class HostileEtcd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(fake_.port(), 0);
    AnswerWell();
  }
  void AnswerWell() {
    fake_.On("/v3/kv/range", FakeEtcd::Answer(Obj("")));
    fake_.On("/v3/kv/put", FakeEtcd::Answer(Obj("")));
    fake_.On("/v3/kv/txn", FakeEtcd::Answer(Obj(R"(,"succeeded":true)")));
    fake_.On("/v3/kv/deleterange", FakeEtcd::Answer(Obj("")));
  }
  std::unique_ptr<EtcdStore> Connect(milliseconds request_timeout = milliseconds(5000),
                                     int tries = EtcdStore::kDefaultTransactionTries) {
    return std::make_unique<EtcdStore>(fake_.address(), milliseconds(5000), request_timeout, tries);
  }
  // Runs `call`, which must throw cdt::Error with `code` whose message holds each of `says`.
  template <typename F>
  void ExpectError(F&& call, ErrorCode code, const std::vector<std::string>& says) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      for (const std::string& s : says)
        EXPECT_NE(std::string(e.what()).find(s), std::string::npos)
            << "'" << s << "' missing from: " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a cdt::Error: " << e.what();
    }
  }
  std::string Server() const { return "etcd at 127.0.0.1:" + std::to_string(fake_.port()); }

  FakeEtcd fake_;
};

struct BadReply {
  std::string path;  // which request gets it
  std::string body;
  int status;
  std::string says;  // what the error must say
};

TEST_F(HostileEtcd, EveryBadReplyIsAStoreErrorNamingServerAndKey) {
  const std::vector<BadReply> cases = {
      {"/v3/kv/range", "", 200, "the reply is empty"},
      {"/v3/kv/range", "garbage\x01\xff", 200, "the reply is not JSON"},
      {"/v3/kv/range", "{\"header\":", 200, "the reply is not JSON"},
      {"/v3/kv/range", "[1,2]", 200, "not a JSON object"},
      {"/v3/kv/range", "{}", 200, "no response header"},
      {"/v3/kv/range", R"({"header":"x"})", 200, "header is \"x\", not an object"},
      {"/v3/kv/range",
       R"({"error":"etcdserver: request timed out","message":"etcdserver: request timed out"})",
       200, "etcd answered an error: etcdserver: request timed out"},
      {"/v3/kv/range", Obj(R"(,"kvs":"x")"), 200, "'kvs' is \"x\", not an array"},
      {"/v3/kv/range", Obj(R"(,"kvs":[1])"), 200, "kvs[0] is 1, not an object"},
      {"/v3/kv/range", Found("!!not base64"), 200, "'value' is \"!!not base64\", not base64"},
      {"/v3/kv/range", Found("NQ"), 200, "'value' is \"NQ\", not base64"},  // padding missing
      {"/v3/kv/range", Obj(R"(,"kvs":[{"key":"am9iL24","mod_revision":"5"}])"), 200,
       "'key' is \"am9iL24\", not base64"},
      {"/v3/kv/range", Obj(R"(,"kvs":[{"key":7,"mod_revision":"5"}])"), 200,
       "'key' is 7, not a string"},
      {"/v3/kv/range", Obj(R"(,"kvs":[{"key":"b3RoZXI=","mod_revision":"5"}])"), 200,
       "not the key asked for ('other')"},
      {"/v3/kv/range", Obj(R"(,"kvs":[{"mod_revision":"5"}])"), 200, "not the key asked for"},
      {"/v3/kv/range", Found("NQ==", "\"5x\""), 200, "'mod_revision' is \"5x\", not an int64"},
      {"/v3/kv/range", Found("NQ==", "1e300"), 200, "'mod_revision' is 1e+300, not an int64"},
      {"/v3/kv/range", Found("NQ==", "\"99999999999999999999\""), 200,
       "'mod_revision' is \"99999999999999999999\", not an int64"},
      {"/v3/kv/range", Found("NQ==", "18446744073709551615"), 200,
       "'mod_revision' is 18446744073709551615, not an int64"},
      {"/v3/kv/range", Found("NQ==", "\"0\""), 200, "no positive mod_revision"},
      {"/v3/kv/range",
       Obj(R"(,"kvs":[{"key":"am9iL24=","mod_revision":"5"},{"key":"am9iL24=","mod_revision":"6"}])"),
       200, "holds 2 keys for a request of one"},
      {"/v3/kv/range", R"({"error":"illegal base64 data","code":3})", 400, "answered HTTP 400"},
      {"/v3/kv/range", "", 503, "answered HTTP 503"},
      {"/v3/kv/put", "", 200, "the reply is empty"},
      {"/v3/kv/put", "OK", 200, "the reply is not JSON"},
      {"/v3/kv/txn", "garbage", 200, "the reply is not JSON"},
      {"/v3/kv/txn", Obj(R"(,"succeeded":"yes")"), 200,
       "'succeeded' is \"yes\", not true or false"},
      {"/v3/kv/deleterange", Obj(R"(,"deleted":"-1")"), 200, "'deleted' is negative: -1"},
      {"/v3/kv/deleterange", Obj(R"(,"deleted":1.5)"), 200, "'deleted' is 1.5, not an int64"},
  };
  auto store = Connect();
  for (const BadReply& c : cases) {
    SCOPED_TRACE(c.path + " answering " + std::to_string(c.status) + " '" + c.body + "'");
    AnswerWell();  // every other request answered as etcd does
    fake_.On(c.path, FakeEtcd::Answer(c.body, c.status));
    const int before = fake_.Requests(c.path);
    ExpectError(
        [&] {
          if (c.path == "/v3/kv/range") (void)store->Get(kKey, milliseconds(60000));
          if (c.path == "/v3/kv/put") store->Set(kKey, "5");
          if (c.path == "/v3/kv/txn") (void)store->Add(kKey, 1);
          if (c.path == "/v3/kv/deleterange") (void)store->Delete(kKey);
        },
        ErrorCode::kStore, {Server(), "key [" + kKey + "]", c.says, "--rdzv-endpoint"});
    // Refused at the first bad reply: not polled again until Get's minute is over.
    EXPECT_EQ(fake_.Requests(c.path) - before, 1);
  }
}

TEST_F(HostileEtcd, ATransactionThatNeverSucceedsEndsAfterItsTries) {
  fake_.On("/v3/kv/range", FakeEtcd::Answer(Found("MQ==")));  // "1"
  fake_.On("/v3/kv/txn", [this](const httplib::Request&, httplib::Response& res) {
    // The comparison never holds (but for a client that would retry forever: it fails, not hangs).
    const bool give_in = fake_.Requests("/v3/kv/txn") > 10000;
    res.set_content(Obj(give_in ? R"(,"succeeded":true)" : ""), "application/json");
  });
  auto store = Connect(milliseconds(60000), 7);
  ExpectError([&] { (void)store->Add(kKey, 1); }, ErrorCode::kStore,
              {Server(), "Add(1) on key [job/n]", "never succeeded after 7 tries"});
  EXPECT_EQ(fake_.Requests("/v3/kv/txn"), 7);
  ExpectError([&] { (void)store->CompareSet(kKey, "1", "2"); }, ErrorCode::kStore,
              {Server(), "CompareSet on key [job/n]", "never succeeded after 7 tries"});
  EXPECT_EQ(fake_.Requests("/v3/kv/txn"), 14);
}

TEST_F(HostileEtcd, ATransactionThatNeverSucceedsEndsAtTheRequestTimeout) {
  // Each refusal takes 25 ms, so a 300 ms budget allows at most 300 / 25 + 1 tries, whatever the
  // machine's speed (a slow one makes fewer): far below the million the count would allow.
  fake_.On("/v3/kv/range", FakeEtcd::Answer(Found("MQ==")));
  fake_.On("/v3/kv/txn", [this](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(milliseconds(25));
    const bool give_in = fake_.Requests("/v3/kv/txn") > 100;  // as above
    res.set_content(Obj(give_in ? R"(,"succeeded":true)" : ""), "application/json");
  });
  auto store = Connect(milliseconds(300), 1000000);
  ExpectError([&] { (void)store->Add(kKey, 1); }, ErrorCode::kStore, {"never succeeded after"});
  EXPECT_GE(fake_.Requests("/v3/kv/txn"), 1);
  EXPECT_LE(fake_.Requests("/v3/kv/txn"), 300 / 25 + 1);
}

TEST_F(HostileEtcd, ContentionIsRetriedUntilTheTransactionHolds) {
  // Lost twice to "another writer", then won: Add returns the value it wrote.
  fake_.On("/v3/kv/range", FakeEtcd::Answer(Found("NDE=")));  // "41"
  fake_.On("/v3/kv/txn", [this](const httplib::Request&, httplib::Response& res) {
    const bool won = fake_.Requests("/v3/kv/txn") > 2;
    res.set_content(Obj(won ? R"(,"succeeded":true)" : ""), "application/json");
  });
  EXPECT_EQ(Connect()->Add(kKey, 1), 42);
  EXPECT_EQ(fake_.Requests("/v3/kv/txn"), 3);
}

// A lost transaction's reply as etcd writes it for EtcdStore's: the failure branch's read of the
// key, holding `value64` at mod revision `rev`.
std::string LostWithRead(const std::string& value64, const std::string& rev) {
  return Obj(R"(,"responses":[{"response_range":{)" + kHeader + R"(,"kvs":[{"key":")" + kKey64 +
             R"(","create_revision":"2","mod_revision":")" + rev + R"(","version":"1","value":")" +
             value64 + R"("}],"count":"1"}}])");
}

TEST_F(HostileEtcd, ACompareSetLostToAnotherWriterReturnsItsValueWithoutAnotherRead) {
  // Missing when read (so "" as expected), but "other" won the transaction: the lost
  // transaction's failure branch says so, and CompareSet returns it at once — one range and one
  // transaction, where 1,023 members losing a round's "open" paid a second range each.
  fake_.On("/v3/kv/range", FakeEtcd::Answer(Obj("")));
  fake_.On("/v3/kv/txn", [](const httplib::Request& req, httplib::Response& res) {
    EXPECT_NE(req.body.find("\"failure\""), std::string::npos) << req.body;
    res.set_content(LostWithRead("b3RoZXI=", "9"), "application/json");  // "other"
  });
  EXPECT_EQ(Connect()->CompareSet(kKey, "", "mine"), "other");
  EXPECT_EQ(fake_.Requests("/v3/kv/range"), 1);
  EXPECT_EQ(fake_.Requests("/v3/kv/txn"), 1);
  // A failure branch of another shape is a bad reply, not a retry.
  fake_.On("/v3/kv/txn", FakeEtcd::Answer(Obj(R"(,"responses":[{"response_put":{}}])")));
  ExpectError([&] { (void)Connect()->CompareSet(kKey, "", "mine"); }, ErrorCode::kStore,
              {Server(), "transaction on key [job/n]", "not a range"});
}

TEST_F(HostileEtcd, ACounterThatIsNotANumberOrWouldOverflowIsRefused) {
  auto store = Connect();
  fake_.On("/v3/kv/range", FakeEtcd::Answer(Found("MTJhYmM=")));  // "12abc"
  ExpectError([&] { (void)store->Add(kKey, 1); }, ErrorCode::kStore,
              {Server(), "key [job/n]", "'12abc', not a decimal int64"});
  fake_.On("/v3/kv/range", FakeEtcd::Answer(Found(etcd::ToBase64("9223372036854775807"))));
  ExpectError([&] { (void)store->Add(kKey, 1); }, ErrorCode::kStore,
              {Server(), "would overflow int64"});
  EXPECT_EQ(fake_.Requests("/v3/kv/txn"), 0);  // nothing written
  EXPECT_EQ(store->Add(kKey, -1), 9223372036854775806);
}

TEST_F(HostileEtcd, AReplyTooLongIsCutWhileItArrives) {
  fake_.On("/v3/kv/range", FakeEtcd::Answer(std::string(etcd::kMaxReplyBytes + 1, ' ')));
  ExpectError([&] { (void)Connect()->Check(kKey); }, ErrorCode::kStore,
              {Server(), "key [job/n]", "longer than 8 MiB"});
}

TEST_F(HostileEtcd, AReplyDribbledPastTheRequestTimeoutIsCut) {
  // One byte every 20 ms for 20 s: each read comes well within the client's read timeout (a
  // second, so that a loaded machine does not trip it instead), the whole reply does not.
  fake_.On("/v3/kv/range", [this](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [this](size_t sent, httplib::DataSink& s) {
      if (sent >= 1000 || fake_.released()) {
        s.done();
        return true;
      }
      std::this_thread::sleep_for(milliseconds(20));
      return s.write(" ", 1);
    });
  });
  ExpectError([&] { (void)Connect(milliseconds(1000))->Check(kKey); }, ErrorCode::kStore,
              {Server(), "key [job/n]", "still arriving after 1000 ms"});
}

TEST_F(HostileEtcd, AServerThatIsNotEtcdIsRefusedAtConnect) {
  fake_.On("/version", FakeEtcd::Answer("<html>hello</html>"));
  ExpectError([&] { (void)Connect(); }, ErrorCode::kStore,
              {Server(), "GET /version: the answer is not etcd's", "--rdzv-endpoint"});
}

TEST_F(HostileEtcd, TimeoutsTooLargeForTheClockMeanNoDeadline) {
  // Missing twice, then there. A deadline computed as now + timeout would wrap to the past and
  // end the wait after the first look.
  fake_.On("/v3/kv/range", [this](const httplib::Request&, httplib::Response& res) {
    const bool there = fake_.Requests("/v3/kv/range") > 2;
    res.set_content(there ? Found("aGVyZQ==") : Obj(""), "application/json");  // "here"
  });
  auto store = Connect(milliseconds::max());
  EXPECT_EQ(store->Get(kKey, milliseconds::max()), "here");
  store->Wait({kKey}, milliseconds::max());
  EXPECT_GE(fake_.Requests("/v3/kv/range"), 3);
}

// A watch stream: its messages, one per line, the last after `delay`.
FakeEtcd::Handler Stream(std::vector<std::string> lines, milliseconds delay, std::string* body) {
  return
      [lines = std::move(lines), delay, body](const httplib::Request& req, httplib::Response& res) {
        if (body != nullptr) *body = req.body;
        res.set_chunked_content_provider("application/json",
                                         [lines, delay](size_t, httplib::DataSink& sink) {
                                           for (size_t i = 0; i < lines.size(); ++i) {
                                             if (i + 1 == lines.size())
                                               std::this_thread::sleep_for(delay);
                                             const std::string line = lines[i] + "\n";
                                             if (!sink.write(line.data(), line.size()))
                                               return false;
                                           }
                                           sink.done();
                                           return true;
                                         });
      };
}

const std::string kCreated = R"({"result":{)" + kHeader + R"(,"created":true}})";
std::string PutEvent(const std::string& value64) {
  return R"({"result":{)" + kHeader + R"(,"events":[{"kv":{"key":")" + kKey64 +
         R"(","create_revision":"8","mod_revision":"8","version":"1","value":")" + value64 +
         R"("}}]}})";
}

TEST_F(HostileEtcd, AWaitIsParkedOnAWatchNotPolled) {
  // The key is missing at revision 7; the watch from revision 8 delivers its put 300 ms later.
  // One range and one watch, where polling would have read the key a dozen times.
  std::string watch_body;
  fake_.On("/v3/watch", Stream({kCreated, PutEvent("aGVyZQ==")}, milliseconds(300), &watch_body));
  auto store = Connect();
  EXPECT_EQ(store->Get(kKey, milliseconds(20000)), "here");
  EXPECT_EQ(fake_.Requests("/v3/kv/range"), 1);
  EXPECT_EQ(fake_.Requests("/v3/watch"), 1);
  EXPECT_NE(watch_body.find(R"("start_revision":"8")"), std::string::npos) << watch_body;
  EXPECT_NE(watch_body.find(kKey64), std::string::npos) << watch_body;
}

TEST_F(HostileEtcd, AWatchThatEndsOrIsMissingFallsBackToReadingTheKey) {
  // Cancelled by the server (its start was compacted): the key is read again and watched again,
  // until the wait's timeout. Without a watch endpoint (404), the key is polled.
  fake_.On("/v3/watch", Stream({kCreated, R"({"result":{)" + kHeader + R"(,"canceled":true,)" +
                                              R"("compact_revision":"9"}})"},
                               milliseconds(0), nullptr));
  auto store = Connect();
  ExpectError([&] { (void)store->Get(kKey, milliseconds(300)); }, ErrorCode::kTimeout,
              {"key [job/n]"});
  EXPECT_GE(fake_.Requests("/v3/watch"), 2);
  EXPECT_EQ(fake_.Requests("/v3/kv/range"), fake_.Requests("/v3/watch") + 1);
  fake_.On("/v3/watch", FakeEtcd::Answer("", 404));
  const int watches = fake_.Requests("/v3/watch");
  ExpectError([&] { (void)store->Get(kKey, milliseconds(300)); }, ErrorCode::kTimeout,
              {"key [job/n]"});
  EXPECT_EQ(fake_.Requests("/v3/watch"), watches + 1);  // asked once, then polled
  EXPECT_GE(fake_.Requests("/v3/kv/range"), watches + 5);
}

TEST_F(HostileEtcd, ABadWatchStreamIsAStoreErrorNamingServerAndKey) {
  for (const auto& [lines, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"garbage"}, "not a JSON object"},
           {{kCreated, R"({"error":{"grpc_code":14,"message":"etcdserver: no leader"}})"},
            "etcdserver: no leader"},
           {{R"({"result":{"events":[{"kv":{"key":"b3RoZXI=","value":"eA=="}}]}})"},
            "not for the key watched"},
           {{R"({"result":{"events":[{"type":"FROB","kv":{}}]}})"}, "type"},
           {{R"({"result":"x"})"}, "not an object"}}) {
    fake_.On("/v3/watch", Stream(lines, milliseconds(0), nullptr));
    ExpectError([&] { (void)Connect()->Get(kKey, milliseconds(5000)); }, ErrorCode::kStore,
                {Server(), "watch of key [job/n]", says});
  }
  fake_.On("/v3/watch", FakeEtcd::Answer("{}", 500));
  ExpectError([&] { (void)Connect()->Get(kKey, milliseconds(5000)); }, ErrorCode::kStore,
              {Server(), "watch of key [job/n]", "HTTP 500"});
}

TEST(EtcdReply, ParsesWhatEtcd34Writes) {
  const std::string where = "etcd at test: request";
  EXPECT_FALSE(etcd::ParseRangeReply(Obj(""), kKey, where).exists);
  const etcd::KeyValue kv = etcd::ParseRangeReply(Found("NQ=="), kKey, where);
  EXPECT_TRUE(kv.exists);
  EXPECT_EQ(kv.value, "5");
  EXPECT_EQ(kv.mod_revision, 5);
  EXPECT_EQ(etcd::ParseRangeReply(Found("NQ==", "12"), kKey, where).mod_revision, 12);
  EXPECT_EQ(etcd::ParseRangeReply(Obj(""), kKey, where).revision, 7);  // the header's
  EXPECT_FALSE(etcd::ParseWatchMessage(kCreated, kKey, where).put.has_value());
  EXPECT_EQ(etcd::ParseWatchMessage(PutEvent("NQ=="), kKey, where).put, "5");
  EXPECT_FALSE(etcd::ParseWatchMessage(
                   R"({"result":{"events":[{"type":"DELETE","kv":{"key":")" + kKey64 + R"("}}]}})",
                   kKey, where)
                   .put.has_value());
  EXPECT_TRUE(etcd::ParseWatchMessage(R"({"result":{"canceled":true}})", kKey, where).canceled);
  EXPECT_TRUE(etcd::ParseTxnReply(Obj(R"(,"succeeded":true,"responses":[])"), where));
  EXPECT_FALSE(etcd::ParseTxnReply(Obj(""), where));
  std::optional<etcd::KeyValue> read;
  EXPECT_FALSE(etcd::ParseTxnReply(LostWithRead("NQ==", "12"), where, kKey, &read));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->value, "5");
  EXPECT_EQ(read->mod_revision, 12);
  read.reset();
  EXPECT_FALSE(etcd::ParseTxnReply(Obj(""), where, kKey, &read));
  EXPECT_FALSE(read.has_value());
  EXPECT_EQ(etcd::ParseDeleteRangeReply(Obj(R"(,"deleted":"1")"), where), 1);
  EXPECT_EQ(etcd::ParseDeleteRangeReply(Obj(""), where), 0);
  EXPECT_EQ(etcd::ParseVersionReply(R"({"etcdserver":"3.4.23","etcdcluster":"3.4.0"})", where),
            "3.4.23");
  EXPECT_EQ(etcd::ParseCounter("", where), 0);
  EXPECT_EQ(etcd::ParseCounter("-9223372036854775808", where), std::numeric_limits<int64_t>::min());
  for (const char* bad : {"+1", " 1", "1 ", "9223372036854775808", "0x10", "1.0", "-"})
    EXPECT_THROW(etcd::ParseCounter(bad, where), Error) << bad;
  const std::string bytes("\0\xff\x01 binary", 10);
  EXPECT_EQ(etcd::FromBase64(etcd::ToBase64(bytes)), bytes);
  EXPECT_EQ(etcd::FromBase64(""), "");
  for (const char* bad :
       {"NQ", "NR==", "N Q==", "NQ==x", "====", "NQ==NQ==", "\xA3m9iL24=", "\x80\x80\x80\x80"})
    EXPECT_FALSE(etcd::FromBase64(bad).has_value()) << bad;
}

}  // namespace
}  // namespace cdt
