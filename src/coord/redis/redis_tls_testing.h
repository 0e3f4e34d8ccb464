// Test helpers for Redis over TLS (tests only, CMake target gnomon_redis_tls_testing):
// redis-server or a Redis Sentinel that serve TLS only (--port 0 --tls-port P) on a free loopback
// port, with certificates of src/testing/test_certificates.h.
//
// Thread safety: none; use from the test's main thread.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_TLS_TESTING_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_TLS_TESTING_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "gnomon/redis_coordinator.h"
#include "gnomon/time.h"
#include "src/testing/free_port.h"
#include "src/testing/real_wait.h"
#include "src/testing/test_certificates.h"

namespace gnomon::testing {

// Whether /usr/bin/redis-server and /usr/bin/openssl are there (tests skip without them).
bool HaveRedisTlsTools();

// TLS options trusting the test CA (and with the client certificate when `client_cert`).
TlsOptions Trusting(const TestCertificates& certs, bool client_cert = false);

// One redis-server (or, with Sentinel(), a Redis Sentinel) serving TLS only, in its own folder.
class TlsRedisServer {
 public:
  struct Options {
    std::string cert_file;                  // the server's certificate; default: server.crt
    std::string key_file;                   // its key; default: server.key
    std::string auth_clients = "optional";  // --tls-auth-clients: no | optional | yes
    std::string password;                   // --requirepass when not empty
    // A Sentinel monitoring "mymaster" at 127.0.0.1:<sentinel_of>, over TLS; 0 = a server.
    int sentinel_of = 0;
  };
  TlsRedisServer(const TestCertificates& certs, Options options);
  ~TlsRedisServer();
  TlsRedisServer(const TlsRedisServer&) = delete;
  TlsRedisServer& operator=(const TlsRedisServer&) = delete;

  // Starts the process (again after Kill, on the same port and data) and waits up to 10 s until
  // it answers PING over TLS. Returns whether it does.
  bool Start();
  // SIGKILL and reap.
  void Kill();
  int port() const { return port_; }
  // The server's log (for failure messages).
  std::string Log() const;

 private:
  const TestCertificates& certs_;
  Options options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace gnomon::testing

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_TLS_TESTING_H_
