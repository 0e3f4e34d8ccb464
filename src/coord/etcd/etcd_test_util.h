// Test helpers for the etcd backend's tests: an etcd server or cluster on free loopback ports in
// a temporary directory, started and killed by the test (ctest label "integration").
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_TEST_UTIL_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_TEST_UTIL_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/coord/etcd/etcd_client.h"
#include "src/testing/free_port.h"
#include "src/testing/real_wait.h"

extern char** environ;

namespace gnomon::testing {

inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";

inline bool HaveEtcd() { return access(kEtcdBinary, X_OK) == 0; }

// TLS of an etcd member's client URL: its certificate and key, and for --client-cert-auth the CA
// that signs client certificates.
struct EtcdMemberTls {
  std::string cert_file;
  std::string key_file;
  std::string client_ca;  // empty: clients need no certificate
};

// One etcd member process (of a single-member cluster, or of `cluster` when given).
class EtcdMember {
 public:
  EtcdMember(std::string name, std::filesystem::path dir)
      : name_(std::move(name)), dir_(std::move(dir)) {
    client_port_ = FreeLoopbackPort();
    peer_port_ = FreeLoopbackPort();
  }
  ~EtcdMember() { Kill(); }

  std::string peer_url() const { return "http://127.0.0.1:" + std::to_string(peer_port_); }
  std::string client_url() const {
    return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(client_port_);
  }
  // Serve clients over TLS (before Spawn). `client` is what WaitHealthy connects with.
  void UseTls(EtcdMemberTls tls, TlsOptions client) {
    tls_ = std::move(tls);
    client_tls_ = std::move(client);
  }
  int client_port() const { return client_port_; }
  const std::string& name() const { return name_; }

  // Spawns the member. `initial_cluster` is "name=peer_url,..." (empty: just this member).
  bool Spawn(const std::string& initial_cluster = "") {
    const std::string cluster =
        initial_cluster.empty() ? name_ + "=" + peer_url() : initial_cluster;
    std::vector<std::string> args = {
        kEtcdBinary, "--name", name_, "--data-dir", (dir_ / (name_ + ".etcd")).string(),
        "--listen-client-urls",
        // A TLS member also answers on 127.0.0.2, an address its
        // test certificate does not name.
        tls_ ? client_url() + ",https://127.0.0.2:" + std::to_string(client_port_) : client_url(),
        "--advertise-client-urls", client_url(), "--listen-peer-urls", peer_url(),
        "--initial-advertise-peer-urls", peer_url(), "--initial-cluster", cluster,
        "--initial-cluster-token", "gnomon-test", "--initial-cluster-state", "new",
        "--heartbeat-interval", "50", "--election-timeout", "500"};
    if (tls_) {
      args.insert(args.end(), {"--cert-file", tls_->cert_file, "--key-file", tls_->key_file});
      if (!tls_->client_ca.empty()) {
        args.insert(args.end(), {"--client-cert-auth", "--trusted-ca-file", tls_->client_ca});
      }
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // etcd 3.4 logs to stderr only: into <dir>/<name>.log.
    const std::string log = (dir_ / (name_ + ".log")).string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, kEtcdBinary, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      return false;
    }
    return true;
  }

  // Waits (up to `limit` of real time) until the member answers a linearizable read.
  bool WaitHealthy(Duration limit = std::chrono::seconds(20)) {
    coord::EtcdClientOptions o;
    o.endpoints = {{"127.0.0.1", client_port_}};
    o.tls = client_tls_;
    o.connect_timeout = std::chrono::milliseconds(200);
    o.io_timeout = std::chrono::seconds(1);
    o.backoff_min = std::chrono::milliseconds(1);
    o.backoff_max = std::chrono::milliseconds(2);
    const Duration deadline = SystemClock::Get().SteadyNow() + limit;
    while (SystemClock::Get().SteadyNow() < deadline) {
      coord::EtcdClient client(o);
      if (client.Call("/v3/kv/range", {{"key", "aGVhbHRo"}}).ok()) return true;
      RealWait(std::chrono::milliseconds(50));
    }
    return false;
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }

 private:
  std::string name_;
  std::filesystem::path dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  pid_t pid_ = -1;
  std::optional<EtcdMemberTls> tls_;
  TlsOptions client_tls_;
};

// A temporary directory removed with its contents on destruction: in /dev/shm when there is
// one (etcd fsyncs every commit; on tmpfs that costs nothing, so the suite takes seconds).
class TempDir {
 public:
  TempDir() {
    std::error_code ec;
    const std::filesystem::path root = std::filesystem::is_directory("/dev/shm", ec)
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    std::string pattern = root / "gnomon-etcd-XXXXXX";
    GNOMON_CHECK(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace gnomon::testing

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_TEST_UTIL_H_
