// Raw HTTP request bytes as a local process or the network could send them to the dashboard
// (dashboard/http_request.h, server.h; issue 41): through the same reader, head screen (Host,
// method, path, the token) and handler a connection uses, without a socket (`Server::Answer`).
// Whatever the bytes, the answer is "" (a connection would wait for more) or one whole HTTP/1.1
// response that closes the connection; and the reader decides the same whether the bytes arrive
// at once or in pieces (byte 0 picks the piece size), never keeping more than its limits.
#include <cstdlib>
#include <string>

#include "common/unix_time.h"
#include "dashboard/http_request.h"
#include "dashboard/job_view.h"
#include "dashboard/server.h"
#include "fuzz_util.h"

namespace {

using cdt::dashboard::HttpRequestReader;

// One view with a worker in it (so /api/state and /metrics have something to render) and one
// server over it, made once: answering must not depend on a fresh process.
cdt::dashboard::Server& FuzzServer() {
  static cdt::dashboard::JobView view("fuzz");
  static cdt::dashboard::Server* server = [] {
    const char* doc =
        R"({"format":"cdt-live","version":1,"worker_id":0,"rank":0,"world":1,"generation":0,)"
        R"("step":3,"end_step":10,"steps":4,"samples":64,"finished":false,"unix_time":1e9,)"
        R"("step_time":{},"gradients":{"phases":[],"bucket_comm_s":[],"bucket_wait_s":[]},)"
        R"("checkpoints":{},"energy":{},"comm":{"allreduce":[],"sent_bytes":[],)"
        R"("received_bytes":[]},"loss_curve":[[3,0.5]],"recoveries":[]})";
    view.Update(0, doc, 1e9);
    cdt::dashboard::ServerOptions o;
    o.job_id = "fuzz";
    o.secret = "fuzz-secret-0123456789";  // the corpus' X-CDT-Token is its token
    return new cdt::dashboard::Server(view, o, [](const std::string& kind, int rank, double) {
      return kind + ":" + std::to_string(rank);
    });
  }();
  return *server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  const std::string_view bytes = cdt::fuzz::AsText(data + 1, size - 1);

  const std::string answer = FuzzServer().Answer(bytes);
  if (!answer.empty() && (answer.rfind("HTTP/1.1 ", 0) != 0 ||
                          answer.find("\r\nConnection: close\r\n") == std::string::npos))
    std::abort();

  cdt::dashboard::HttpLimits limits;
  HttpRequestReader whole(limits, nullptr), pieces(limits, nullptr);
  whole.Feed(bytes);
  for (size_t at = 0; at < bytes.size() && pieces.state() == HttpRequestReader::State::kNeedMore;
       at += piece)
    pieces.Feed(bytes.substr(at, piece));
  if (whole.state() != pieces.state()) std::abort();
  if (whole.state() == HttpRequestReader::State::kRefused &&
      whole.refusal().status != pieces.refusal().status)
    std::abort();
  if (whole.state() == HttpRequestReader::State::kComplete &&
      (whole.request().body != pieces.request().body ||
       whole.request().headers != pieces.request().headers ||
       whole.request().body.size() > limits.max_body_bytes))
    std::abort();
  return 0;
}
