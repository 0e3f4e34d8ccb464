#include "src/coord/redis/redis_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace gnomon::coord {
namespace {

Duration SteadyNow() { return SystemClock::Get().SteadyNow(); }

std::string Errno(int err) { return std::strerror(err); }

std::string TimedOut(Duration d) {
  return "timed out after " + std::to_string(d.count()) + "ms waiting for the server";
}

// Waits until `fd` is ready for `events` or `deadline` (SteadyNow) passes. Returns false on
// timeout; an error when poll fails.
Result<bool> WaitFor(int fd, short events, Duration deadline) {
  while (true) {
    const int64_t left = std::max<int64_t>(0, (deadline - SteadyNow()).count());
    pollfd pfd{fd, events, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, INT32_MAX)));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return UnavailableError("poll: " + Errno(errno));
  }
}

void SetTcpOptions(int fd) {
  // As hiredis did: no Nagle delay (a command is one write), keep-alive probes after 15 s idle.
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  int idle = 15, interval = 5, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

bool IsIpAddress(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// OpenSSL's reason for the first error queued on this thread (then clears the queue).
std::string OpenSslReason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  const char* reason = ERR_reason_error_string(e);
  if (reason != nullptr) return reason;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// The message of a failed SSL call (SSL_get_error's `code`).
std::string TlsFailure(int code) {
  if (code == SSL_ERROR_ZERO_RETURN) return "connection closed by the server";
  if (code == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    return errno == 0 ? "connection closed by the server" : Errno(errno);
  }
  if (ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    ERR_clear_error();
    return "connection closed by the server";
  }
  return "TLS: " + OpenSslReason();
}

// --- An OpenSSL BIO on the socket that writes with MSG_NOSIGNAL --------------------------------
// OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE when the server has closed
// the connection; a library must not kill (or need a signal disposition from) its host process.

int FdOf(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = send(FdOf(bio), data, static_cast<size_t>(size), MSG_NOSIGNAL);
  if (n >= 0) return static_cast<int>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(bio);
  return -1;
}

int BioRead(BIO* bio, char* out, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = recv(FdOf(bio), out, static_cast<size_t>(size), 0);
  if (n >= 0) return static_cast<int>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_read(bio);
  return -1;
}

long BioCtrl(BIO*, int cmd, long, void*) {  // NOLINT(runtime/int): OpenSSL's signature
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;     // nothing buffered here
}

BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gnomon redis socket");
    GNOMON_CHECK(m != nullptr);
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    return m;
  }();
  return method;
}

// A PEM key with a passphrase must fail, not prompt on the daemon's terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

}  // namespace

// --- RedisTlsContext ----------------------------------------------------------------------------

Result<std::shared_ptr<const RedisTlsContext>> RedisTlsContext::Create(const TlsOptions& tls) {
  GNOMON_CHECK(tls.enabled);
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return InternalError("redis TLS: " + OpenSslReason());
  std::shared_ptr<const RedisTlsContext> out(new RedisTlsContext(tls, ctx));
  auto bad = [](const char* param, const std::string& file, const std::string& why) {
    return InvalidArgumentError("redis TLS: " + std::string(param) + " \"" + file + "\": " + why);
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_default_passwd_cb(ctx, NoPassphrase);
  SSL_CTX_set_verify(ctx, tls.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  // Called only when the server asks for a client certificate and none is set: noted for the
  // error message, as a server that requires one only closes the connection after the handshake.
  SSL_CTX_set_client_cert_cb(ctx, &RedisSocket::OnCertificateRequest);
  if (!tls.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, tls.ca_file.c_str(), nullptr) != 1) {
      return bad("tls_ca", tls.ca_file, "cannot load the CA certificates: " + OpenSslReason());
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return InternalError("redis TLS: cannot load the system's CA certificates: " + OpenSslReason());
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return InvalidArgumentError("redis TLS: tls_cert and tls_key go together");
  }
  if (!tls.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, tls.cert_file.c_str()) != 1) {
      return bad("tls_cert", tls.cert_file, "cannot load the certificate: " + OpenSslReason());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return bad("tls_key", tls.key_file, "cannot load the private key: " + OpenSslReason());
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return bad("tls_key", tls.key_file, "does not match tls_cert \"" + tls.cert_file + "\"");
    }
  }
  return out;
}

RedisTlsContext::~RedisTlsContext() { SSL_CTX_free(ctx_); }

// --- RedisSocket --------------------------------------------------------------------------------

Result<std::unique_ptr<RedisSocket>> RedisSocket::Connect(const std::string& host, int port,
                                                          const RedisTlsContext* tls,
                                                          Duration connect_timeout,
                                                          Duration io_timeout) {
  const Duration deadline = SteadyNow() + connect_timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs);
  if (rc != 0) {
    return UnavailableError("cannot resolve \"" + host + "\": " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(addrs, &freeaddrinfo);
  std::string why = "no address";
  int fd = -1;
  for (const addrinfo* a = addrs; a != nullptr && fd < 0; a = a->ai_next) {
    const int s = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
      why = Errno(errno);
      continue;
    }
    int err = 0;
    if (connect(s, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        Result<bool> ready = WaitFor(s, POLLOUT, deadline);
        if (!ready.ok()) {
          err = EIO;
        } else if (!*ready) {
          err = ETIMEDOUT;
        } else {
          socklen_t len = sizeof err;
          if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
    }
    if (err == 0) {
      fd = s;
    } else {
      why = err == ETIMEDOUT
                ? "connect timed out after " + std::to_string(connect_timeout.count()) + "ms"
                : Errno(err);
      close(s);
    }
  }
  if (fd < 0) return UnavailableError("cannot connect: " + why);
  SetTcpOptions(fd);
  std::unique_ptr<RedisSocket> sock(new RedisSocket(fd, io_timeout));
  if (tls == nullptr) {
    // Plain: blocking with kernel timeouts, so a round trip is one send and one recv.
    const int64_t ms = std::max<int64_t>(1, io_timeout.count());  // 0 would mean "forever"
    const timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
      return UnavailableError("cannot set the I/O timeout: " + Errno(errno));
    }
    return sock;
  }
  ERR_clear_error();
  sock->ssl_ = SSL_new(tls->ctx());
  BIO* bio = BIO_new(SocketBioMethod());
  if (sock->ssl_ == nullptr || bio == nullptr) {
    BIO_free(bio);
    return InternalError("TLS: " + OpenSslReason());
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(sock->ssl_, bio, bio);  // the SSL owns the BIO
  SSL_set_app_data(sock->ssl_, sock.get());
  const std::string& name = tls->options().server_name.empty() ? host : tls->options().server_name;
  X509_VERIFY_PARAM* param = SSL_get0_param(sock->ssl_);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (IsIpAddress(name)) {
    if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1) {
      return InvalidArgumentError("TLS: bad server address \"" + name + "\"");
    }
  } else {
    // SNI carries host names only (RFC 6066), never an address.
    if (SSL_set_tlsext_host_name(sock->ssl_, name.c_str()) != 1 ||
        X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0) != 1) {
      return InvalidArgumentError("TLS: bad server name \"" + name + "\"");
    }
  }
  SSL_set_connect_state(sock->ssl_);
  Status s = sock->Handshake(deadline);
  if (!s.ok()) {
    if (tls->options().verify && SSL_get_verify_result(sock->ssl_) != X509_V_OK) {
      const long v = SSL_get_verify_result(sock->ssl_);  // NOLINT(runtime/int)
      std::string detail = X509_verify_cert_error_string(v);
      if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        detail += "; expected \"" + name + "\"";
      }
      return UnavailableError("TLS: certificate verify failed (" + detail + ")");
    }
    return s;
  }
  return sock;
}

Status RedisSocket::Handshake(Duration deadline) {
  while (true) {
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_do_handshake(ssl_);
    if (rc == 1) return Status::Ok();
    Result<bool> ready = AwaitTls(rc, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return UnavailableError("TLS: handshake timed out");
  }
}

int RedisSocket::OnCertificateRequest(SSL* ssl, X509**, EVP_PKEY**) {
  static_cast<RedisSocket*>(SSL_get_app_data(ssl))->certificate_requested_ = true;
  return 0;  // no certificate
}

Result<bool> RedisSocket::AwaitTls(int rc, Duration deadline) const {
  const int code = SSL_get_error(ssl_, rc);
  short events = 0;
  if (code == SSL_ERROR_WANT_READ) events = POLLIN;
  if (code == SSL_ERROR_WANT_WRITE) events = POLLOUT;
  if (events == 0) return TlsFailed(TlsFailure(code));
  return WaitFor(fd_, events, deadline);
}

Status RedisSocket::TlsFailed(std::string why) const {
  if (certificate_requested_ && !answered_) {
    why += " (the server asked for a client certificate and none is configured: tls_cert, tls_key)";
  }
  return UnavailableError(why);
}

RedisSocket::~RedisSocket() {
  // No close_notify: the server treats a closed connection like QUIT, and after a failed call
  // OpenSSL forbids SSL_shutdown anyway.
  if (ssl_ != nullptr) SSL_free(ssl_);
  close(fd_);
}

Status RedisSocket::Write(std::string_view data) {
  if (ssl_ == nullptr) {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n >= 0) {
        data.remove_prefix(static_cast<size_t>(n));
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return UnavailableError(TimedOut(io_timeout_));
      } else if (errno != EINTR) {
        return UnavailableError(Errno(errno));
      }
    }
    return Status::Ok();
  }
  // Without SSL_MODE_ENABLE_PARTIAL_WRITE a write completes whole; a retry after WANT_* must pass
  // the same arguments.
  while (true) {
    ERR_clear_error();
    errno = 0;
    size_t written = 0;
    const int rc = SSL_write_ex(ssl_, data.data(), data.size(), &written);
    if (rc == 1) return Status::Ok();
    Result<bool> ready = AwaitTls(rc, SteadyNow() + io_timeout_);
    if (!ready.ok()) return ready.status();
    if (!*ready) return UnavailableError(TimedOut(io_timeout_));
  }
}

Result<size_t> RedisSocket::Read(char* buf, size_t size) {
  if (ssl_ == nullptr) {
    while (true) {
      const ssize_t n = recv(fd_, buf, size, 0);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) return UnavailableError("connection closed by the server");
      if (errno == EAGAIN || errno == EWOULDBLOCK) return UnavailableError(TimedOut(io_timeout_));
      if (errno != EINTR) return UnavailableError(Errno(errno));
    }
  }
  Result<size_t> n = TlsRead(buf, size, io_timeout_);
  if (n.ok() && *n == 0) return UnavailableError(TimedOut(io_timeout_));
  return n;
}

Result<size_t> RedisSocket::ReadWithin(char* buf, size_t size, Duration wait) {
  if (ssl_ != nullptr) return TlsRead(buf, size, wait);
  const Duration deadline = SteadyNow() + wait;
  while (true) {
    Result<bool> ready = WaitFor(fd_, POLLIN, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return size_t{0};
    const ssize_t n = recv(fd_, buf, size, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return UnavailableError("connection closed by the server");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return UnavailableError(Errno(errno));
    }
  }
}

Result<size_t> RedisSocket::TlsRead(char* buf, size_t size, Duration wait) {
  const Duration deadline = SteadyNow() + wait;
  while (true) {
    ERR_clear_error();
    errno = 0;
    size_t got = 0;
    const int rc = SSL_read_ex(ssl_, buf, size, &got);
    if (rc == 1) {
      answered_ = true;
      return got;
    }
    Result<bool> ready = AwaitTls(rc, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return size_t{0};
  }
}

}  // namespace gnomon::coord
