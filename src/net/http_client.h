// HttpClient: gnomon's one HTTP client (libcurl), used by the HTTP executor, webhook alerts and
// OTLP span export. Internal to the project (target gnomon_net); its options types are public
// (gnomon/net.h).
//
// One call = one request on a fresh connection, from start to end on the calling thread: DNS,
// connect, TLS, send, receive. Any HTTP status is an answer (a 500 is an OK Result); an error
// Status means no complete answer arrived. Messages start with "<METHOD> <url>: " (the URL
// without user info) and say what failed:
//   InvalidArgument     the URL, method or a header is malformed; a TLS file cannot be used
//   FailedPrecondition  "egress: 169.254.169.254 is denied by egress_deny 169.254.0.0/16": every
//   address the
//                       request could connect to was refused by the egress rule
//   DeadlineExceeded    "connect timeout 10s", "total timeout 30s", "idle timeout 5s", each with
//                       a detail in parentheses
//   Unavailable         "DNS: ...", "connect: ...", "TLS: the certificate of <host:port> was not
//                       verified: ...", "TLS: handshake with <host:port> failed: ...", "receive:
//                       ...", "send: ...", "cancelled", "too many redirects"
//
// Egress: before anything else, a URL whose host is an IP literal is checked against
// options.egress; then every socket libcurl opens (each address of a resolved name, each
// redirect hop, the proxy) is checked in CURLOPT_OPENSOCKETFUNCTION against the address it is
// about to connect to, and a refused address never gets a socket. Through a proxy, the rule
// therefore sees the proxy's address: the proxy decides what the target's name resolves to.
//
// Response body: the first options.max_body_bytes bytes are kept (or the last, with
// keep_body_tail); the rest is read and discarded, never buffered, so memory stays bounded by
// about twice the cap whatever the size of the answer, and the transfer still ends normally (its
// status counts). HttpResponse::body_bytes tells how much arrived; body_truncated() that some of
// it was dropped. The transfer's time is bounded by the timeouts.
//
// Cancellation: a stop request on HttpRequest::stop wakes the transfer's poll at once
// (curl_multi_wakeup from a std::stop_callback) and the transfer is abandoned: the call returns
// Unavailable "cancelled" within milliseconds, whatever it was waiting for (DNS, connect, TLS,
// the answer).
//
// Thread safety: Send is thread-safe; any number of threads may call it at once. Each call uses
// its own libcurl handles; the DNS cache is shared between the calls of one client (a CURLSH
// with one mutex per shared kind; TLS sessions are not shared, see http_client.cc). libcurl is a
// C library: nothing here throws.
#ifndef GNOMON_SRC_NET_HTTP_CLIENT_H_
#define GNOMON_SRC_NET_HTTP_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "gnomon/net.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon::net {

struct HttpClientOptions {
  // Longest wait for a connection: TCP connect and TLS handshake (through a proxy, to the proxy
  // and through it). Default 10 s; never more than the request's total timeout.
  Duration connect_timeout = std::chrono::seconds(10);
  // Longest a whole request may take, from its start to the last byte of the answer. Default
  // 30 s; Duration::zero() = no limit. HttpRequest::timeout overrides it per request.
  Duration total_timeout = std::chrono::seconds(30);
  // The request fails when no byte of body moved either way for this long (connecting and
  // waiting for the answer's head count as silence). Default Duration::zero() = off.
  // HttpRequest::idle_timeout overrides it per request.
  Duration idle_timeout = Duration::zero();
  // Bytes of the response body kept in HttpResponse::body; the rest is read and discarded.
  // Default 1 MiB.
  size_t max_body_bytes = size_t{1} << 20;
  // Keep the last max_body_bytes bytes of a longer body instead of the first. Default false.
  bool keep_body_tail = false;
  // Redirects (3xx with a Location) followed to http(s) URLs; each hop's connections pass the
  // egress rule. Default 0: not followed, the 3xx is the answer.
  int max_redirects = 0;
  // TLS of https:// URLs. Default: the system CAs, verification on, no client certificate.
  TlsOptions tls;
  // Addresses a connection may reach. Default EgressRule::Default(): link-local denied.
  EgressRule egress = EgressRule::Default();
  // The proxy. Unset (default): libcurl reads the environment: `http_proxy` for http:// URLs,
  // `https_proxy` (or `HTTPS_PROXY`) for https://, `all_proxy` (or `ALL_PROXY`) for both, and
  // `no_proxy` (or `NO_PROXY`: comma-separated host names, domain suffixes, IP addresses or
  // "*") for the hosts reached directly; upper-case `HTTP_PROXY` is ignored (the CGI "httpoxy"
  // problem). "" = no proxy whatever the environment says. "http://host:port" = that proxy.
  // The TLS options apply to the target, not to an https:// proxy.
  std::optional<std::string> proxy;
  // Fixed name resolutions, "host:port:address" as curl's --resolve (for tests). Default none.
  std::vector<std::string> resolve;
  // The User-Agent header unless a request sets one. Default "gnomon".
  std::string user_agent = "gnomon";
};

struct HttpRequest {
  // An HTTP method token in upper case: GET, POST, PUT, DELETE, ... Default "GET".
  std::string method = "GET";
  // http:// or https://, without user info (see ParseHttpUrl in src/net/http_url.h).
  std::string url;
  // Sent as given, after libcurl's own (Host, User-Agent, Accept); a header named here replaces
  // libcurl's. No Content-Type is sent unless it is here. REQUIRES nothing: a name that is not an
  // HTTP token, or a value with CR, LF or NUL, fails the call with InvalidArgument.
  std::vector<std::pair<std::string, std::string>> headers;
  // The request body; sent (with Content-Length) when not empty, and always for POST and PUT.
  std::string body;
  // Overrides HttpClientOptions::total_timeout for this request (e.g. the time left until a
  // deadline). Duration::zero() = no limit.
  std::optional<Duration> timeout;
  // Overrides HttpClientOptions::idle_timeout for this request. Duration::zero() = off.
  std::optional<Duration> idle_timeout;
  // A stop request aborts the call promptly (Unavailable "cancelled"). Default: never.
  std::stop_token stop;
  // Overrides HttpClientOptions::egress for this request (e.g. the rule of the job's namespace).
  // Not owned; must outlive the call. Default nullptr: the client's rule.
  const EgressRule* egress = nullptr;
};

struct HttpResponse {
  int status = 0;           // the HTTP status of the last answer (after redirects, if followed)
  std::string body;         // at most max_body_bytes of the body (see keep_body_tail)
  uint64_t body_bytes = 0;  // bytes of body received in all (after chunked decoding)
  // Whether bytes of the body were dropped to keep within max_body_bytes.
  bool body_truncated() const { return body_bytes > body.size(); }
};

class HttpClient {
 public:
  // Cheap: no connection is made. Options are not checked here (a missing CA file fails each
  // request naming it; see ValidateTlsOptions).
  explicit HttpClient(HttpClientOptions options = {});
  // REQUIRES: no Send in progress.
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` and waits for the whole answer (or an error, see the file comment).
  // Thread-safe.
  Result<HttpResponse> Send(const HttpRequest& request) const;

  const HttpClientOptions& options() const { return options_; }

 private:
  struct Shared;  // the CURLSH and its locks

  const HttpClientOptions options_;
  std::unique_ptr<Shared> shared_;
};

}  // namespace gnomon::net

#endif  // GNOMON_SRC_NET_HTTP_CLIENT_H_
