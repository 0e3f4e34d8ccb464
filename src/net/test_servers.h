// For tests only (header-only; link cpp-httplib, OpenSSL and gnomon_test_certificates): the test
// certificates, and real HTTP and HTTPS servers (cpp-httplib) on loopback ports, started and
// stopped by the test.
#ifndef GNOMON_SRC_NET_TEST_SERVERS_H_
#define GNOMON_SRC_NET_TEST_SERVERS_H_

#include <httplib.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "src/testing/test_certificates.h"

namespace gnomon::net::testing {

// The shared test PKI (src/testing/test_certificates.h) under the names these tests use:
//   ca.pem, other-ca.pem, server.pem/.key (localhost, 127.0.0.1), client.pem/.key
//   (CN=gnomon-client, clientAuth); any other name is a path in the same folder.
// ok() is false (and error() says why) when openssl failed; tests ASSERT on it.
class TestPki {
 public:
  bool ok() const { return certs_.ok(); }
  std::string error() const { return certs_.Log(); }
  std::string Path(const std::string& name) const {
    for (const char* pem : {"ca", "other-ca", "server", "client"}) {
      if (name == std::string(pem) + ".pem") return certs_.File(std::string(pem) + ".crt");
    }
    return certs_.File(name);
  }

 private:
  gnomon::testing::TestCertificates certs_;
};

// A cpp-httplib server (plain, or TLS when given a certificate) on `host` and a free port, served
// by its own thread. Register handlers on server() before Start().
class TestServer {
 public:
  TestServer() : server_(std::make_unique<httplib::Server>()) {}
  // TLS with `cert`/`key`; with `client_ca`, a client certificate signed by it is required.
  TestServer(const std::string& cert, const std::string& key, const std::string& client_ca = "")
      : server_(std::make_unique<httplib::SSLServer>(
            cert.c_str(), key.c_str(), client_ca.empty() ? nullptr : client_ca.c_str())) {}
  ~TestServer() { Stop(); }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  httplib::Server& server() { return *server_; }

  // Binds and starts serving; false when it could not. Returns once the accept loop runs, so
  // that Stop() always reaches it.
  bool Start(const std::string& host = "127.0.0.1") {
    if (!server_->is_valid()) return false;
    port_ = server_->bind_to_any_port(host);
    if (port_ <= 0) return false;
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    for (int i = 0; i < 2000 && !server_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return server_->is_running();
  }
  void Stop() {
    if (thread_.joinable()) {
      server_->stop();
      thread_.join();
    }
  }
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// The subject CN of the client certificate of a TLS request, "" without one.
inline std::string PeerCommonName(const httplib::Request& req) {
  if (req.ssl == nullptr) return "";
  X509* cert = SSL_get1_peer_certificate(req.ssl);
  if (cert == nullptr) return "";
  char cn[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn - 1);
  X509_free(cert);
  return cn;
}

}  // namespace gnomon::net::testing

#endif  // GNOMON_SRC_NET_TEST_SERVERS_H_
