// The transport-free HTTP exchange: what the HTTP server (src/server/http_server.h) reads off a
// connection and what the API (src/server/http_api.h) answers. Plain values, thread-compatible.
// Everything here came from the network and is untrusted: the server bounds its sizes (header
// bytes, body bytes), the API checks every value it reads.
#ifndef GNOMON_SRC_SERVER_HTTP_MESSAGE_H_
#define GNOMON_SRC_SERVER_HTTP_MESSAGE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gnomon::server {

struct Request {
  std::string method;                              // "GET", "POST", ...
  std::string path;                                // decoded path, without the query
  std::multimap<std::string, std::string> params;  // decoded query parameters
  // The headers the API reads (absent = empty).
  std::string authorization;   // Authorization
  std::string if_match;        // If-Match
  std::string if_none_match;   // If-None-Match
  std::string content_type;    // Content-Type
  std::string origin;          // Origin (browsers send it on cross-origin and on POST requests)
  std::string host;            // Host
  std::string sec_fetch_site;  // Sec-Fetch-Site (same-origin, same-site, cross-site, none)
  std::optional<uint64_t> content_length;  // Content-Length, when given
  bool chunked = false;                    // Transfer-Encoding: chunked
  std::string remote_address;              // the client's IP address ("127.0.0.1", "::1")
  bool probe_lane = false;                 // arrived on the probe listener ([api] probe_listen)
  // The subject (RFC 2253, "CN=ops,O=Example") of the client certificate the TLS listener
  // verified against [api] client_ca; empty without one.
  std::string client_subject;
  std::string body;  // read only after Admit accepted the request
};

// The source of a streamed answer (server-sent events, Content-Type text/event-stream), given
// instead of a body. After the head, the server calls Next on a handler thread, at once and then
// `interval` after each call returned (never two at once), and sends the text it appended to
// `out` as soon as it returns. Next returning false ends the stream after that text. The server
// also ends a stream after HttpServerOptions::max_stream_duration, when the client is gone or
// reads too slowly (write_timeout), and on Stop; it sends an SSE comment when a stream was quiet
// for 15 s, so a vanished client is noticed. A stream holds a connection, never a thread while
// it waits; at most HttpServerOptions::max_streams are open at once (then 503).
class EventStream {
 public:
  virtual ~EventStream() = default;
  virtual std::chrono::milliseconds interval() const = 0;
  virtual bool Next(std::string* out) = 0;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<EventStream> stream;  // set: a streamed answer (body unused)
};

// What an HTTP server serves. Both methods are called on the server's worker threads, many at
// once: implementations are thread-safe and never throw.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Called once the request line and headers have arrived, before any byte of a body is read:
  // nullopt = read the body (within the server's limit) and call Handle; otherwise this is the
  // answer, and the connection is closed after it.
  virtual std::optional<Response> Admit(const Request& head) = 0;
  // Answers a whole request.
  virtual Response Handle(const Request& request) = 0;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_HTTP_MESSAGE_H_
