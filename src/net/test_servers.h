// For tests only (header-only; link cpp-httplib and OpenSSL): certificates made with the openssl
// command line in a temporary directory, and real HTTP and HTTPS servers (cpp-httplib) on
// loopback ports, started and stopped by the test.
#ifndef GNOMON_SRC_NET_TEST_SERVERS_H_
#define GNOMON_SRC_NET_TEST_SERVERS_H_

#include <httplib.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

namespace gnomon::net::testing {

// A test PKI in a fresh temporary directory, removed by the destructor:
//   ca.pem           "gnomon test CA", signs the certificates below
//   other-ca.pem     an unrelated CA (the wrong one)
//   server.pem/.key  CN=localhost, subjectAltName DNS:localhost, IP:127.0.0.1 (signed by ca)
//   client.pem/.key  CN=gnomon-test-client, extendedKeyUsage clientAuth (signed by ca)
// EC P-256 keys: a few milliseconds each. ok() is false (and error() says why) when openssl
// failed; tests ASSERT on it.
class TestPki {
 public:
  TestPki() {
    char tmpl[] = "/tmp/gnomon-pki-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    Write("server.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    Write("client.ext", "extendedKeyUsage=clientAuth\n");
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    ok_ = Run("openssl req -x509" + key + " -keyout ca.key -out ca.pem -days 2" +
              " -subj '/CN=gnomon test CA'") &&
          Run("openssl req -x509" + key + " -keyout other-ca.key -out other-ca.pem -days 2" +
              " -subj '/CN=gnomon other CA'") &&
          Run("openssl req" + key + " -keyout server.key -out server.csr -subj '/CN=localhost'") &&
          Run("openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial" +
              std::string(" -out server.pem -days 2 -extfile server.ext")) &&
          Run("openssl req" + key +
              " -keyout client.key -out client.csr -subj '/CN=gnomon-test-client'") &&
          Run("openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial" +
              std::string(" -out client.pem -days 2 -extfile client.ext"));
  }
  ~TestPki() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
  }
  bool Run(const std::string& command) {
    const std::string full = "cd '" + dir_ + "' && " + command + " >>openssl.log 2>&1";
    if (std::system(full.c_str()) == 0) return true;
    std::ifstream log(Path("openssl.log"));
    std::stringstream text;
    text << log.rdbuf();
    error_ = command + " failed:\n" + text.str();
    return false;
  }

  std::string dir_;
  bool ok_ = false;
  std::string error_;
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
