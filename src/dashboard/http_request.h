// HTTP/1.1 requests as the dashboard takes them, and its answers (RFC 9112, a strict subset).
//
// One request per connection, answered with `Connection: close`. The head (request line, headers,
// blank line) is at most `max_head_bytes`; a body is declared by Content-Length and at most
// `max_body_bytes`; a Transfer-Encoding (chunked or any other) is refused — the dashboard never
// needs one, and a body whose length is not known up front cannot be refused before it is read.
//
// HttpRequestReader takes the bytes of a connection as they arrive and decides as soon as the head
// is complete, before a byte of the body is kept: a refusal then carries the answer (400, 411,
// 413, 431, or what the caller's screen returns, e.g. 403 for a missing token) and the connection
// is closed without reading on. So a request never costs more memory than the two limits, however
// many bytes the client sends (the listener reads into a fixed buffer).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cdt::dashboard {

struct HttpLimits {
  size_t max_head_bytes = 8192;  // request line + headers + the blank line: beyond, 431
  size_t max_body_bytes = 4096;  // a larger Content-Length: 413
  size_t max_headers = 64;       // more header lines: 431
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // as sent: GET, HEAD, POST, ...
  std::string target;   // origin-form: /path?query
  std::string path;     // the target up to '?'
  std::string version;  // HTTP/1.0 or HTTP/1.1
  HttpHeaders headers;  // names as sent, values without surrounding blanks
  std::string body;     // exactly Content-Length bytes

  // The first header of that name (ASCII case-insensitive); "" when there is none.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;  // sent when set or when the body is not empty
  std::string body;
  HttpHeaders headers;  // extra ones; Content-Length and Connection are added by SerializeResponse
};

// "Not Found" for 404, ... ("Unknown" for a status it does not name).
const char* HttpStatusText(int status);
// A JSON error answer: {"error": message}.
HttpResponse HttpJsonError(int status, const std::string& message);
// The bytes on the wire: status line, headers, Content-Length, `Connection: close`, and the body
// unless `head_only` (an answer to HEAD).
std::string SerializeResponse(const HttpResponse& response, bool head_only);

// Decides on a request from its head alone (method, path, headers; the body not read yet): an
// answer refuses it, nullopt lets its body be read.
using HeadScreen = std::function<std::optional<HttpResponse>(const HttpRequest& head)>;

class HttpRequestReader {
 public:
  enum class State { kNeedMore, kRefused, kComplete };

  HttpRequestReader(HttpLimits limits, HeadScreen screen);

  // The connection's next bytes. Once the state is kRefused or kComplete, bytes are ignored (the
  // connection is answered and closed; no second request is read from it).
  State Feed(std::string_view bytes);
  State state() const { return state_; }
  // Whether any byte arrived (a connection that timed out silently gets no answer).
  bool started() const { return started_; }
  const HttpRequest& request() const { return request_; }   // complete after kComplete
  const HttpResponse& refusal() const { return refusal_; }  // set with kRefused

 private:
  State TakeHead(std::string_view head);
  std::optional<HttpResponse> CheckFraming();  // Transfer-Encoding, Content-Length, Host
  State Refuse(HttpResponse response);

  const HttpLimits limits_;
  const HeadScreen screen_;
  State state_ = State::kNeedMore;
  bool started_ = false;
  bool head_done_ = false;
  std::string buffer_;  // the head so far (until head_done_), then nothing: the body goes below
  size_t body_length_ = 0;
  HttpRequest request_;
  HttpResponse refusal_;
};

}  // namespace cdt::dashboard
