#include "dashboard/http_request.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace cdt::dashboard {

namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// RFC 9110 tchar: what a method or a header name is made of.
bool IsTokenChar(unsigned char c) {
  return std::isalnum(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

// A header value: visible characters, blanks and obs-text; no other control character.
bool IsValueChar(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Content-Length: 1*DIGIT, at most 19 of them (no overflow of uint64_t).
std::optional<uint64_t> ParseLength(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// Parses "METHOD SP origin-form SP HTTP/1.x" into `r`; an answer when it is not one.
std::optional<HttpResponse> ParseRequestLine(std::string_view line, HttpRequest& r) {
  const size_t a = line.find(' ');
  const size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
  if (b == std::string_view::npos || line.find(' ', b + 1) != std::string_view::npos)
    return HttpJsonError(400, "the request line is not METHOD /path HTTP/1.1");
  const std::string_view method = line.substr(0, a), target = line.substr(a + 1, b - a - 1),
                         version = line.substr(b + 1);
  if (method.empty() || method.size() > 16 ||
      !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
    return HttpJsonError(400, "the request's method is not a method");
  if (target.empty() || target[0] != '/' ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
    return HttpJsonError(400, "the request's target is not a path (/...)");
  if (version.substr(0, 5) != "HTTP/")
    return HttpJsonError(400, "the request line does not end in HTTP/1.1");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return HttpJsonError(505, "this dashboard speaks HTTP/1.1 and HTTP/1.0 only");
  r.method = method;
  r.target = target;
  r.path = target.substr(0, target.find('?'));
  r.version = version;
  return std::nullopt;
}

// One "name: value" line into `r.headers`; an answer when it is not one.
std::optional<HttpResponse> ParseHeaderLine(std::string_view line, HttpRequest& r) {
  if (line.empty() || line[0] == ' ' || line[0] == '\t')
    return HttpJsonError(400, "folded header lines are not taken (RFC 9112, 5.2)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0)
    return HttpJsonError(400, "a header line is not name: value");
  const std::string_view name = line.substr(0, colon), value = line.substr(colon + 1);
  if (!std::all_of(name.begin(), name.end(),
                   [](char c) { return IsTokenChar(static_cast<unsigned char>(c)); }))
    return HttpJsonError(400, "a header name holds a character names may not hold");
  if (!std::all_of(value.begin(), value.end(),
                   [](char c) { return IsValueChar(static_cast<unsigned char>(c)); }))
    return HttpJsonError(400, "a header value holds a control character");
  r.headers.emplace_back(name, TrimBlanks(value));
  return std::nullopt;
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (IEquals(k, name)) return v;
  return "";
}

bool HttpRequest::HasHeader(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return IEquals(h.first, name); });
}

const char* HttpStatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

HttpResponse HttpJsonError(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                   nlohmann::json::error_handler_t::replace);
  return r;
}

std::string SerializeResponse(const HttpResponse& response, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " +
                    HttpStatusText(response.status) + "\r\n";
  if (!response.content_type.empty() || !response.body.empty())
    out += "Content-Type: " +
           (response.content_type.empty() ? std::string("text/plain") : response.content_type) +
           "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += "Connection: close\r\n";
  for (const auto& [k, v] : response.headers) out += k + ": " + v + "\r\n";
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

HttpRequestReader::HttpRequestReader(HttpLimits limits, HeadScreen screen)
    : limits_(limits), screen_(std::move(screen)) {}

HttpRequestReader::State HttpRequestReader::Refuse(HttpResponse response) {
  refusal_ = std::move(response);
  buffer_.clear();
  buffer_.shrink_to_fit();
  return state_ = State::kRefused;
}

HttpRequestReader::State HttpRequestReader::Feed(std::string_view bytes) {
  if (state_ != State::kNeedMore) return state_;
  if (!bytes.empty()) started_ = true;
  std::string rest;  // the body's first bytes when they came with the head's last ones
  if (!head_done_) {
    // Keep at most max_head_bytes: a head that has not ended by then is refused.
    const size_t take = std::min(bytes.size(), limits_.max_head_bytes - buffer_.size());
    const size_t from = buffer_.size() >= 3 ? buffer_.size() - 3 : 0;
    buffer_.append(bytes.substr(0, take));
    const size_t end = buffer_.find("\r\n\r\n", from);
    if (end == std::string::npos) {
      if (buffer_.size() >= limits_.max_head_bytes)
        return Refuse(HttpJsonError(431, "the request's head is over " +
                                             std::to_string(limits_.max_head_bytes) + " bytes"));
      return state_;
    }
    rest = buffer_.substr(end + 4);
    buffer_.resize(end + 4);
    if (TakeHead(buffer_) != State::kNeedMore) return state_;
    buffer_.clear();
    buffer_.shrink_to_fit();
    head_done_ = true;
    rest.append(bytes.substr(take, body_length_));  // what came beyond the head's limit
    bytes = rest;
  }
  const size_t want = body_length_ - request_.body.size();
  request_.body.append(bytes.substr(0, std::min(want, bytes.size())));
  if (request_.body.size() == body_length_) state_ = State::kComplete;
  return state_;
}

HttpRequestReader::State HttpRequestReader::TakeHead(std::string_view head) {
  // Lines end in CRLF; a lone CR or LF anywhere is refused (two parsers must never disagree on
  // where a header ends: request smuggling).
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < head.size() - 2;) {
    const size_t end = head.find("\r\n", at);
    const std::string_view line = head.substr(at, end - at);
    if (line.find_first_of("\r\n") != std::string_view::npos)
      return Refuse(HttpJsonError(400, "a bare CR or LF in the request's head"));
    lines.push_back(line);
    at = end + 2;
  }
  if (lines.empty() || lines.size() - 1 > limits_.max_headers)
    return Refuse(HttpJsonError(
        lines.empty() ? 400 : 431,
        lines.empty() ? "no request line"
                      : "more than " + std::to_string(limits_.max_headers) + " header lines"));
  if (auto refused = ParseRequestLine(lines[0], request_)) return Refuse(std::move(*refused));
  for (size_t i = 1; i < lines.size(); ++i)
    if (auto refused = ParseHeaderLine(lines[i], request_)) return Refuse(std::move(*refused));
  if (auto refused = CheckFraming()) return Refuse(std::move(*refused));
  if (screen_)
    if (auto refused = screen_(request_)) return Refuse(std::move(*refused));
  if (body_length_ == 0) state_ = State::kComplete;
  return state_;
}

std::optional<HttpResponse> HttpRequestReader::CheckFraming() {
  const std::string limit = std::to_string(limits_.max_body_bytes);
  std::optional<uint64_t> length;
  int hosts = 0;
  for (const auto& [name, value] : request_.headers) {
    if (IEquals(name, "Transfer-Encoding"))
      return HttpJsonError(411,
                           "Transfer-Encoding (chunked) is refused unread: send the body "
                           "with Content-Length, at most " +
                               limit + " bytes");
    if (IEquals(name, "Host")) ++hosts;
    if (!IEquals(name, "Content-Length")) continue;
    const auto v = ParseLength(value);
    if (!v || (length && *length != *v))
      return HttpJsonError(400, "Content-Length is not one decimal number");
    length = v;
  }
  if (length && *length > limits_.max_body_bytes)
    return HttpJsonError(413, "the body is over " + limit + " bytes (refused unread)");
  if (!length &&
      (request_.method == "POST" || request_.method == "PUT" || request_.method == "PATCH"))
    return HttpJsonError(411, "a " + request_.method + " needs Content-Length (at most " + limit +
                                  " bytes): bodies of unknown length are refused unread");
  if (hosts > 1 || (hosts == 0 && request_.version == "HTTP/1.1"))
    return HttpJsonError(400, "an HTTP/1.1 request needs one Host header");
  body_length_ = static_cast<size_t>(length.value_or(0));
  return std::nullopt;
}

}  // namespace cdt::dashboard
