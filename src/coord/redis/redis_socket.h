// RedisSocket: the byte stream under a RedisConnection (internal): one TCP connection to a
// Redis server or sentinel, plain or TLS (OpenSSL). RedisTlsContext: the TLS settings that the
// connections of one coordinator or queue share (one SSL_CTX: CAs, client certificate,
// verification). Why the project does its own socket I/O: see redis_connection.h.
//
// Timeouts. Connecting (TCP connect, then the TLS handshake) has one deadline, connect_timeout.
// After that every wait for the peer is bounded by io_timeout: each write or read waits at most
// io_timeout for progress, as hiredis' blocking mode did (a reply that keeps arriving is not cut,
// a silent server is). A plain socket is blocking with SO_RCVTIMEO/SO_SNDTIMEO, so a round trip
// costs one send and one recv, nothing more. A TLS socket is non-blocking and waits in poll():
// OpenSSL may need to read while writing and the reverse (handshake messages, session tickets),
// which one blocking call with a timeout cannot express.
//
// Writes never raise SIGPIPE (send with MSG_NOSIGNAL, TLS included, through this file's own
// OpenSSL BIO), so an embedding process need not ignore it. Sockets are close-on-exec: a run's
// child process never inherits one.
//
// Errors are Unavailable with messages that do not name the peer (the caller prefixes
// "redis host:port: ") and never hold a credential: "cannot connect: Connection refused",
// "TLS: certificate verify failed (self-signed certificate)", "connection closed by the server",
// "timed out after 2000ms waiting for the server".
//
// Thread safety: RedisTlsContext is immutable after Create and may be shared by many threads
// (OpenSSL makes SSL objects from one SSL_CTX concurrently). A RedisSocket is used by one thread
// at a time (RedisConnection holds its mutex around every call).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_SOCKET_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_SOCKET_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "gnomon/redis_coordinator.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

struct evp_pkey_st;
struct ssl_ctx_st;
struct ssl_st;
struct x509_st;

namespace gnomon::coord {

class RedisTlsContext {
 public:
  // Loads tls.ca_file (else the system's CAs), tls.cert_file and tls.key_file. InvalidArgument
  // naming the URL parameter and the file when one cannot be read or the key does not match the
  // certificate. REQUIRES: tls.enabled.
  static Result<std::shared_ptr<const RedisTlsContext>> Create(const TlsOptions& tls);
  ~RedisTlsContext();
  RedisTlsContext(const RedisTlsContext&) = delete;
  RedisTlsContext& operator=(const RedisTlsContext&) = delete;

  ssl_ctx_st* ctx() const { return ctx_; }
  const TlsOptions& options() const { return options_; }

 private:
  RedisTlsContext(TlsOptions options, ssl_ctx_st* ctx) : options_(std::move(options)), ctx_(ctx) {}

  const TlsOptions options_;
  ssl_ctx_st* const ctx_;  // owned
};

class RedisSocket {
 public:
  // Connects to host:port (a name is resolved; each address is tried in turn) and, when `tls` is
  // not null, does the TLS handshake, all within connect_timeout. The server's certificate must
  // name tls->options().server_name, or `host` when that is empty. `tls` must outlive the socket.
  static Result<std::unique_ptr<RedisSocket>> Connect(const std::string& host, int port,
                                                      const RedisTlsContext* tls,
                                                      Duration connect_timeout,
                                                      Duration io_timeout);
  ~RedisSocket();
  RedisSocket(const RedisSocket&) = delete;
  RedisSocket& operator=(const RedisSocket&) = delete;

  // Writes all of `data`.
  Status Write(std::string_view data);
  // Reads up to `size` (> 0) bytes: at least one, waiting up to io_timeout for it. Unavailable
  // on a timeout, a connection closed by the peer or a failed link.
  Result<size_t> Read(char* buf, size_t size);
  // Like Read, but waits up to `wait` (>= 0) and returns 0 when nothing arrived by then.
  Result<size_t> ReadWithin(char* buf, size_t size, Duration wait);

 private:
  friend class RedisTlsContext;  // installs OnCertificateRequest
  RedisSocket(int fd, Duration io_timeout) : fd_(fd), io_timeout_(io_timeout) {}
  // Handshake, REQUIRES: ssl_ set. Waits until `deadline` (SteadyNow).
  Status Handshake(Duration deadline);
  // One TLS read: > 0 bytes, 0 when it would wait longer than `wait`, or an error.
  Result<size_t> TlsRead(char* buf, size_t size, Duration wait);
  // Unavailable(`why`), with a hint when the server may have refused the client certificate.
  Status TlsFailed(std::string why) const;
  // After an SSL call on ssl_ returned `rc` (not 1): waits until the socket is ready for what TLS
  // wants (true) or `deadline` passes (false); the TLS failure when it wants nothing to wait for.
  Result<bool> AwaitTls(int rc, Duration deadline) const;
  static int OnCertificateRequest(ssl_st* ssl, x509_st** cert, evp_pkey_st** key);

  const int fd_;
  const Duration io_timeout_;
  ssl_st* ssl_ = nullptr;  // owned; null = plain TCP
  // The server asked for a client certificate during the handshake and none was configured.
  bool certificate_requested_ = false;
  bool answered_ = false;  // a read succeeded: the server accepted the handshake
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_SOCKET_H_
