// HttpServer: the HTTP/1.1 transport of the API, made for a daemon exposed to a network
// (docs/http-api.md "Limits"). It reads requests off connections within fixed bounds and hands
// them to an HttpHandler (src/server/http_message.h): the head first (Admit, before any byte of a
// body is read), then the whole request (Handle).
//
// Thread safety: Start/Stop from one owner thread; the handler is called on the server's threads.
#ifndef GNOMON_SRC_SERVER_HTTP_SERVER_H_
#define GNOMON_SRC_SERVER_HTTP_SERVER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/server/http_message.h"

namespace gnomon::server {

struct HttpServerOptions {
  // "host:port" or "[v6]:port"; port 0 = any free port (see port()). Default "127.0.0.1:8080".
  std::string listen = "127.0.0.1:8080";
  // A second listener that answers only GET /healthz and /readyz, for liveness probes that must
  // not share the connection limits of the API; empty = none. Port 0 = any free port.
  std::string probe_listen;
  // Largest request line plus headers (bytes): beyond it the request is answered 431 and the
  // connection closed. Default 16 KiB.
  size_t max_header_bytes = 16 * 1024;
  // Time from accepting a connection (or the end of its previous request) to the end of the
  // request's headers, however slowly they trickle in; then the connection is closed. Default 10 s.
  Duration header_timeout = std::chrono::seconds(10);
  // Largest request body (bytes): 413, counted while it streams in (also chunked). Default 1 MiB.
  size_t max_body_bytes = 1024 * 1024;
  // Time to receive a body, and to send an answer. Defaults 10 s each.
  Duration body_timeout = std::chrono::seconds(10);
  Duration write_timeout = std::chrono::seconds(10);
  // An idle keep-alive connection is closed after this. Default 5 s.
  Duration idle_timeout = std::chrono::seconds(5);
  // Open connections in all and per client address; beyond them new connections are closed at
  // once (the probe listener has its own small allowance). Defaults 1024 and 256.
  int max_connections = 1024;
  int max_connections_per_client = 256;
  // Threads that run the handler (slow backend calls occupy one each; connections do not).
  // 0 = twice the machine's cores, at least 4: more cost context switches on the request path
  // (measured: docs/benchmarks.md "HTTP API under load"); raise it for a backend with slow
  // round trips. Default 0.
  int handler_threads = 0;
  // Threads doing the network I/O of every connection (they never wait). Default 2.
  int io_threads = 2;
  // Paths answered on an I/O thread instead of a handler thread: their handling must be cheap
  // and never block, and then a saturated handler pool cannot delay them. Default {"/healthz"}.
  std::vector<std::string> inline_paths = {"/healthz"};
  // Streamed answers (server-sent events, EventStream in src/server/http_message.h) open at once;
  // beyond it, 503 with Retry-After. Each is closed after max_stream_duration (a browser's
  // EventSource reconnects by itself). Defaults 64 and 10 minutes.
  int max_streams = 64;
  Duration max_stream_duration = std::chrono::minutes(10);
  // Requests waiting for a handler thread; beyond it, 503 with Retry-After. Default 1024.
  int max_queued_requests = 1024;
  // TLS on the API listener (not the probe listener): PEM files of the certificate chain and its
  // private key; both or neither. TLS 1.2 and later.
  std::string tls_cert;
  std::string tls_key;
  // Mutual TLS: PEM file of the CAs that sign client certificates. With it, a client must present
  // a certificate they signed (else the handshake fails) and its subject reaches the handler as
  // Request::client_subject. Requires tls_cert.
  std::string client_ca;
};

class HttpServer {
 public:
  // `handler` must outlive this object.
  HttpServer(HttpHandler& handler, HttpServerOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listen address(es) and serves on the server's own threads. InvalidArgument for bad
  // options or addresses; Unavailable when an address cannot be bound (taken, not local).
  // REQUIRES: not started.
  Status Start();
  // Stops accepting; requests being handled are answered (later ones get 503), then open
  // connections are closed and every thread is joined. Idempotent.
  void Stop();
  // Reads tls_cert, tls_key and client_ca again (a renewed certificate); new connections use
  // them, open ones keep theirs. On error nothing changes. FailedPrecondition without TLS.
  Status ReloadCertificates();
  // The bound ports (after Start; useful with port 0). probe_port() is 0 without probe_listen.
  int port() const;
  int probe_port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_HTTP_SERVER_H_
