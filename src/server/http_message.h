// The transport-free HTTP exchange: what the HTTP server (src/server/http_server.h) reads off a
// connection and what the API (src/server/http_api.h) answers. Plain values, thread-compatible.
// Everything here came from the network and is untrusted: the server bounds its sizes (header
// bytes, body bytes), the API checks every value it reads.
#ifndef GNOMON_SRC_SERVER_HTTP_MESSAGE_H_
#define GNOMON_SRC_SERVER_HTTP_MESSAGE_H_

#include <cstdint>
#include <map>
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

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
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
