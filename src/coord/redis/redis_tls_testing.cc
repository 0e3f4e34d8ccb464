#include "src/coord/redis/redis_tls_testing.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "src/coord/redis/redis_connection.h"

extern char** environ;

namespace gnomon::testing {
namespace {

constexpr const char* kRedisServer = "/usr/bin/redis-server";

std::string MakeTempDir(const char* what) {
  std::string pattern = std::filesystem::temp_directory_path() / what;
  pattern += "-XXXXXX";
  GNOMON_CHECK(mkdtemp(pattern.data()) != nullptr);
  return pattern;
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

bool HaveRedisTlsTools() { return access(kRedisServer, X_OK) == 0 && HaveOpenssl(); }

TlsOptions Trusting(const TestCertificates& certs, bool client_cert) {
  TlsOptions tls;
  tls.enabled = true;
  tls.ca_file = certs.ca();
  if (client_cert) {
    tls.cert_file = certs.File("client.crt");
    tls.key_file = certs.File("client.key");
  }
  return tls;
}

// --- TlsRedisServer -----------------------------------------------------------------------------

TlsRedisServer::TlsRedisServer(const TestCertificates& certs, Options options)
    : certs_(certs),
      options_(std::move(options)),
      dir_(MakeTempDir("gnomon-redis-tls")),
      port_(FreeLoopbackPort()) {
  if (options_.cert_file.empty()) options_.cert_file = certs_.File("server.crt");
  if (options_.key_file.empty()) options_.key_file = certs_.File("server.key");
}

TlsRedisServer::~TlsRedisServer() {
  Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool TlsRedisServer::Start() {
  const std::vector<std::string> tls_settings = {
      "port 0",
      "bind 127.0.0.1",
      "tls-port " + std::to_string(port_),
      "tls-cert-file " + options_.cert_file,
      "tls-key-file " + options_.key_file,
      "tls-ca-cert-file " + certs_.ca(),
      "tls-auth-clients " + options_.auth_clients,
      "tls-replication yes",
      "protected-mode no",
      "dir " + dir_,
      "logfile " + dir_ + "/redis.log",
  };
  std::string conf;
  for (const std::string& line : tls_settings) conf += line + "\n";
  std::vector<std::string> args = {kRedisServer, dir_ + "/redis.conf"};
  if (options_.sentinel_of > 0) {
    conf += "sentinel monitor mymaster 127.0.0.1 " + std::to_string(options_.sentinel_of) + " 1\n";
    args.push_back("--sentinel");
  } else {
    conf += "save \"\"\nappendonly yes\nappendfsync always\n";
    if (!options_.password.empty()) conf += "requirepass " + options_.password + "\n";
  }
  // Sentinel rewrites its file at start: written once, kept across restarts.
  if (!std::filesystem::exists(dir_ + "/redis.conf")) WriteFile(dir_ + "/redis.conf", conf);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&pid_, kRedisServer, nullptr, nullptr, argv.data(), environ) != 0) {
    pid_ = -1;
    return false;
  }
  // PING over TLS, trusting anything (the tests check verification; this only waits).
  coord::RedisConnectionConfig config;
  config.host = "127.0.0.1";
  config.port = port_;
  config.password = options_.sentinel_of > 0 ? "" : options_.password;
  config.connect_timeout = std::chrono::milliseconds(500);
  config.io_timeout = std::chrono::milliseconds(500);
  TlsOptions tls = Trusting(certs_, /*client_cert=*/true);
  tls.verify = false;
  Result<std::shared_ptr<const coord::RedisTlsContext>> context =
      coord::RedisTlsContext::Create(tls);
  if (!context.ok()) return false;
  config.tls = *context;
  for (int i = 0; i < 500; ++i) {
    Result<std::unique_ptr<coord::RedisConnection>> conn = coord::RedisConnection::Connect(config);
    if (conn.ok()) {
      Result<coord::RedisReply> pong = (*conn)->Command({"PING"});
      if (pong.ok() && pong->str == "PONG") return true;
    }
    RealWait(std::chrono::milliseconds(20));
  }
  return false;
}

void TlsRedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string TlsRedisServer::Log() const {
  std::ifstream in(dir_ + "/redis.log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace gnomon::testing
