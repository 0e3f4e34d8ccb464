// The OpenSSL side of the HTTP server's TLS: the server context built from HttpServerOptions'
// tls_cert, tls_key and client_ca, the verified client subject, and the context new connections
// use (replaced whole on ReloadCertificates; a session keeps the one it started with).
//
// Threads: MakeTlsContext and VerifiedPeerSubject are free of shared state; TlsContexts is safe to
// call from any thread (one mutex, held only to copy or swap a pointer).
#ifndef GNOMON_SRC_SERVER_HTTP_TLS_CONTEXT_H_
#define GNOMON_SRC_SERVER_HTTP_TLS_CONTEXT_H_

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>
// clang-format off
#include <boost/asio/ssl.hpp>
// clang-format on

#include <memory>
#include <mutex>
#include <string>

#include "gnomon/status.h"
#include "src/server/http_server.h"

namespace gnomon::server {

// The TLS server context of tls_cert, tls_key and client_ca (TLS 1.2 or later, no renegotiation;
// with client_ca a client certificate those CAs signed is required). Errors name the option and
// the file.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeTlsContext(const HttpServerOptions& o);

// The RFC 2253 subject of the peer's verified certificate; empty when there is none or it is
// longer than 1 KiB.
std::string VerifiedPeerSubject(SSL* ssl);

// The TLS context new connections use, replaced whole by ReloadCertificates.
class TlsContexts {
 public:
  explicit TlsContexts(std::shared_ptr<boost::asio::ssl::context> c) : current_(std::move(c)) {}
  std::shared_ptr<boost::asio::ssl::context> Current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  void Replace(std::shared_ptr<boost::asio::ssl::context> c) {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(c);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;  // guarded by mu_
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_HTTP_TLS_CONTEXT_H_
