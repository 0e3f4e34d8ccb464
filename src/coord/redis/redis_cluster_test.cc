// RedisClusterClient against a real Redis Cluster that this binary starts: six
// `redis-server --cluster-enabled yes` processes on free loopback ports, formed into three
// primaries with one replica each by `redis-cli --cluster create` (ctest label "integration").
// Every test skips when /usr/bin/redis-server or /usr/bin/redis-cli is missing.
#include "src/coord/redis/redis_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gnomon/redis_coordinator.h"
#include "gnomon/testing/fake_clock.h"
#include "src/coord/conformance_helpers.h"
#include "src/coord/coordinator_conformance.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_layout_testing.h"
#include "src/coord/redis/redis_scripts.h"
#include "src/coord/redis/redis_store.h"
#include "src/testing/free_port.h"
#include "src/testing/real_wait.h"
#include "src/testing/test_certificates.h"

extern char** environ;

namespace gnomon::coord {
namespace {

using std::chrono::milliseconds;
using testing::RealWait;

constexpr const char* kRedisServer = "/usr/bin/redis-server";
constexpr const char* kRedisCli = "/usr/bin/redis-cli";

#define SKIP_WITHOUT_REDIS_CLUSTER_TOOLS()                                        \
  do {                                                                            \
    if (access(kRedisServer, X_OK) != 0 || access(kRedisCli, X_OK) != 0) {        \
      GTEST_SKIP() << kRedisServer << " or " << kRedisCli << " is not installed"; \
    }                                                                             \
  } while (false)

bool PortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// A free port whose cluster bus port (port + 10000) is free too.
int FreeClusterPort() {
  for (;;) {
    const int port = testing::FreeLoopbackPort();
    if (port + 10000 <= 65535 && PortFree(port + 10000)) return port;
  }
}

pid_t Spawn(std::vector<std::string> args, const std::string& output) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

RedisConnectionConfig ConfigFor(int port) {
  RedisConnectionConfig c;
  c.host = "127.0.0.1";
  c.port = port;
  c.connect_timeout = milliseconds(500);
  c.io_timeout = milliseconds(500);
  c.backoff_min = milliseconds(10);
  c.backoff_max = milliseconds(100);
  return c;
}

std::string Text(const Result<RedisReply>& r) {
  if (!r.ok()) return "<" + r.status().ToString() + ">";
  if (r->type == RedisReply::Type::kInteger) return std::to_string(r->integer);
  return r->str;
}

// Six cluster-enabled servers in one temporary folder, formed into 3 primaries + 3 replicas.
// With `certs`, every node serves TLS only, to clients and to the other nodes (--port 0,
// --tls-port, --tls-cluster yes, --tls-replication yes), with server.crt of `certs`.
class TestCluster {
 public:
  explicit TestCluster(const testing::TestCertificates* certs = nullptr) : certs_(certs) {
    std::string pattern = std::filesystem::temp_directory_path() / "gnomon-cluster-XXXXXX";
    GNOMON_CHECK(mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    if (certs_ != nullptr) {
      TlsOptions tls;
      tls.enabled = true;
      tls.ca_file = certs_->ca();
      Result<std::shared_ptr<const RedisTlsContext>> context = RedisTlsContext::Create(tls);
      GNOMON_CHECK(context.ok());
      tls_ = *context;
    }
  }
  ~TestCluster() {
    for (size_t i = 0; i < pids_.size(); ++i) Kill(i);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Starts the servers, creates the cluster and waits until every node says it is ok. Returns
  // an empty string on success, else what went wrong (with the tail of the logs).
  std::string Start() {
    for (int i = 0; i < 6; ++i) {
      // A port free when picked can be taken by a parallel test before the server binds it
      // (or its bus port): a node that exits before it answers starts again on another port.
      // The node counts as up only when the server answering on its port is this process.
      bool up = false;
      for (int attempt = 0; attempt < 5 && !up; ++attempt) {
        const int port = FreeClusterPort();
        const pid_t pid = StartNode(port);
        if (pid < 0) return "cannot start " + std::string(kRedisServer);
        int status = 0;
        bool exited = false;
        up = WaitFor([&] {
               exited = waitpid(pid, &status, WNOHANG) == pid;
               return exited || Text(Run(port, {"INFO", "server"}))
                                        .find("process_id:" + std::to_string(pid) + "\r\n") !=
                                    std::string::npos;
             }) &&
             !exited;
        if (up) {
          ports_.push_back(port);
          pids_.push_back(pid);
        } else if (!exited) {
          kill(pid, SIGKILL);
          waitpid(pid, nullptr, 0);
          return "node " + std::to_string(port) + " does not answer";
        }
      }
      if (!up) return "no node of the cluster could bind a free port in 5 tries";
    }
    std::vector<std::string> create = {kRedisCli, "--cluster", "create"};
    for (int port : ports_) create.push_back("127.0.0.1:" + std::to_string(port));
    for (const char* a : {"--cluster-replicas", "1", "--cluster-yes"}) create.push_back(a);
    if (certs_ != nullptr) create.insert(create.end(), {"--tls", "--cacert", certs_->ca()});
    const pid_t cli = Spawn(create, dir_ + "/create.log");
    int status = 0;
    if (cli < 0 || waitpid(cli, &status, 0) != cli || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      return "redis-cli --cluster create failed: " + Tail(dir_ + "/create.log");
    }
    if (!WaitUntilServing()) return "the cluster never became ok: " + Tail(dir_ + "/create.log");
    // Every replica in sync with its primary (a WAIT counts it only then).
    if (!WaitFor([&] {
          int synced = 0;
          for (int port : ports_) {
            synced += Text(Run(port, {"INFO", "replication"})).find("master_link_status:up") !=
                      std::string::npos;
          }
          return synced == 3;
        })) {
      return "the replicas never synced with their primaries";
    }
    return "";
  }

  // One cluster-enabled redis-server on `port`, its files in a folder of its own.
  pid_t StartNode(int port) {
    const std::string dir = dir_ + "/" + std::to_string(port);
    std::filesystem::create_directories(dir);
    std::vector<std::string> args = {kRedisServer,
                                     "--bind",
                                     "127.0.0.1",
                                     "--dir",
                                     dir,
                                     "--cluster-enabled",
                                     "yes",
                                     "--cluster-config-file",
                                     dir + "/nodes.conf",
                                     "--cluster-node-timeout",
                                     "1000",
                                     "--cluster-require-full-coverage",
                                     "no",
                                     "--appendonly",
                                     "yes",
                                     "--save",
                                     "",
                                     "--protected-mode",
                                     "no"};
    if (certs_ == nullptr) {
      args.insert(args.end(), {"--port", std::to_string(port)});
    } else {
      args.insert(args.end(),
                  {"--port", "0", "--tls-port", std::to_string(port), "--tls-cluster", "yes",
                   "--tls-replication", "yes", "--tls-cert-file", certs_->File("server.crt"),
                   "--tls-key-file", certs_->File("server.key"), "--tls-ca-cert-file", certs_->ca(),
                   "--tls-auth-clients", "no"});
    }
    return Spawn(std::move(args), dir + "/redis.log");
  }

  // Every node says cluster_state:ok and knows 3 online primaries covering every slot.
  bool WaitUntilServing() {
    return WaitFor([&] {
      for (size_t i = 0; i < ports_.size(); ++i) {
        if (pids_[i] < 0) continue;
        if (Text(Run(ports_[i], {"CLUSTER", "INFO"})).find("cluster_state:ok") ==
            std::string::npos) {
          return false;
        }
        Result<RedisReply> shards = Run(ports_[i], {"CLUSTER", "SHARDS"});
        if (!shards.ok()) return false;
        Result<std::vector<ClusterShard>> parsed = ParseClusterShards(*shards);
        if (!parsed.ok() || parsed->size() != 3) return false;
      }
      return true;
    });
  }

  // One command on one node (a fresh connection).
  Result<RedisReply> Run(int port, const std::vector<std::string>& argv) {
    RedisConnectionConfig config = ConfigFor(port);
    config.tls = tls_;
    Result<std::unique_ptr<RedisConnection>> c = RedisConnection::Connect(config);
    if (!c.ok()) return c.status();
    return (*c)->Command(argv);
  }
  std::string Id(int port) { return Text(Run(port, {"CLUSTER", "MYID"})); }
  int PortOf(const std::string& address) {
    return std::stoi(address.substr(address.rfind(':') + 1));
  }
  // The primaries' ports.
  std::vector<int> Primaries() {
    std::vector<int> out;
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (pids_[i] < 0) continue;
      Result<RedisReply> role = Run(ports_[i], {"ROLE"});
      if (role.ok() && !role->elements.empty() && role->elements[0].str == "master") {
        out.push_back(ports_[i]);
      }
    }
    return out;
  }
  // A primary other than `port`.
  int OtherPrimary(int port) {
    for (int p : Primaries()) {
      if (p != port) return p;
    }
    return 0;
  }
  // Starts moving `slot` from primary `from` to primary `to` (IMPORTING, then MIGRATING).
  bool StartMigration(int slot, int from, int to) {
    const std::string s = std::to_string(slot);
    return Text(Run(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", Id(from)})) == "OK" &&
           Text(Run(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", Id(to)})) == "OK";
  }
  // MIGRATE of `key` from primary `from` to primary `to`.
  bool MigrateKey(const std::string& key, int from, int to) {
    return Text(Run(from, {"MIGRATE", "127.0.0.1", std::to_string(to), "", "0", "5000", "KEYS",
                           key})) == "OK";
  }
  // Gives `slot` to primary `to` (SETSLOT NODE): on it, then on the old owner `from`, then on
  // the other primaries, in the order the cluster's documentation gives.
  bool GiveSlot(int slot, int from, int to) {
    std::vector<int> order = {to, from};
    for (int p : Primaries()) {
      if (p != to && p != from) order.push_back(p);
    }
    const std::string id = Id(to);
    for (int p : order) {
      if (Text(Run(p, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id})) != "OK") {
        return false;
      }
    }
    return true;
  }
  // SIGKILL the node on `port`.
  void KillPort(int port) {
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (ports_[i] == port) Kill(i);
    }
  }
  // The port of the replica of the primary on `primary` (0 when it has none).
  int ReplicaOf(int primary) {
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (pids_[i] < 0 || ports_[i] == primary) continue;
      Result<RedisReply> role = Run(ports_[i], {"ROLE"});
      if (role.ok() && role->elements.size() >= 3 && role->elements[0].str == "slave" &&
          role->elements[2].integer == primary) {
        return ports_[i];
      }
    }
    return 0;
  }
  // Sends `sig` (SIGSTOP, SIGCONT) to the node on `port`.
  void SignalPort(int port, int sig) {
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (ports_[i] == port && pids_[i] > 0) kill(pids_[i], sig);
    }
  }
  int seed() const { return ports_.front(); }
  const std::vector<int>& ports() const { return ports_; }

 private:
  template <class Pred>
  bool WaitFor(Pred ready) {
    for (int i = 0; i < 300; ++i) {
      if (ready()) return true;
      RealWait(milliseconds(100));
    }
    return false;
  }
  void Kill(size_t i) {
    if (pids_[i] <= 0) return;
    kill(pids_[i], SIGKILL);
    waitpid(pids_[i], nullptr, 0);
    pids_[i] = -1;
  }
  static std::string Tail(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
  }

  const testing::TestCertificates* certs_;
  std::shared_ptr<const RedisTlsContext> tls_;  // with certs_: trusting their CA
  std::string dir_;
  std::vector<int> ports_;
  std::vector<pid_t> pids_;
};

// --- Without a server -----------------------------------------------------------------------

TEST(RedisClusterTest, RedirectsAreParsedAndMalformedOnesRefused) {
  std::optional<ClusterRedirect> moved = ParseClusterRedirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(moved);
  EXPECT_FALSE(moved->ask);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->host, "127.0.0.1");
  EXPECT_EQ(moved->port, 6381);
  std::optional<ClusterRedirect> ask = ParseClusterRedirect("ASK 0 ::1:7000");
  ASSERT_TRUE(ask);
  EXPECT_TRUE(ask->ask);
  EXPECT_EQ(ask->host, "::1");
  EXPECT_EQ(ask->port, 7000);
  for (const char* bad :
       {"MOVED", "MOVED 16384 h:1", "MOVED -1 h:1", "MOVED 1 h:0", "MOVED 1 h", "MOVED 1 :5",
        "MOVED x h:1", "ASK 1 h:99999", "ERR MOVED 1 h:1", "TRYAGAIN Multiple keys"}) {
    EXPECT_FALSE(ParseClusterRedirect(bad)) << bad;
  }
}

TEST(RedisClusterTest, MalformedShardListsAreRefused) {
  auto str = [](std::string s) {
    RedisReply r;
    r.type = RedisReply::Type::kString;
    r.str = std::move(s);
    return r;
  };
  auto num = [](int64_t v) {
    RedisReply r;
    r.type = RedisReply::Type::kInteger;
    r.integer = v;
    return r;
  };
  auto arr = [](std::vector<RedisReply> e) {
    RedisReply r;
    r.type = RedisReply::Type::kArray;
    r.elements = std::move(e);
    return r;
  };
  auto shards = [&](RedisReply slots) {
    RedisReply node = arr({str("port"), num(7000), str("ip"), str("10.0.0.1"), str("endpoint"),
                           str("?"), str("role"), str("master"), str("health"), str("online")});
    return arr({arr({str("slots"), std::move(slots), str("nodes"), arr({node})})});
  };
  Result<std::vector<ClusterShard>> ok = ParseClusterShards(shards(arr({num(0), num(16383)})));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].host, "10.0.0.1");  // endpoint "?" falls back to the ip
  EXPECT_EQ((*ok)[0].port, 7000);
  for (const RedisReply& slots : {arr({num(0)}), arr({num(0), num(16384)}), arr({num(5), num(4)}),
                                  arr({num(-1), num(3)}), arr({str("a"), num(3)})}) {
    EXPECT_FALSE(ParseClusterShards(shards(slots)).ok());
  }
  EXPECT_FALSE(ParseClusterShards(str("x")).ok());
  // More shards than slots (each claiming slot 0) would overflow the map's index.
  RedisReply many = shards(arr({num(0), num(0)}));
  const RedisReply one = many.elements[0];
  many.elements.assign(kClusterSlots + 1, one);
  Result<std::vector<ClusterShard>> too_many = ParseClusterShards(many);
  EXPECT_FALSE(too_many.ok());
  many.elements.resize(kClusterSlots);
  EXPECT_TRUE(ParseClusterShards(many).ok());
}

// --- Against a real cluster -----------------------------------------------------------------

class RedisClusterServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access(kRedisServer, X_OK) != 0 || access(kRedisCli, X_OK) != 0) return;
    cluster_ = new TestCluster();
    error_ = new std::string(cluster_->Start());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete error_;
    cluster_ = nullptr;
    error_ = nullptr;
  }
  void SetUp() override {
    SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
    ASSERT_EQ(*error_, "");
  }
  std::unique_ptr<RedisClusterClient> Client(std::vector<std::string> scripts = {}) {
    Result<std::unique_ptr<RedisClusterClient>> c = RedisClusterClient::Connect(
        ConfigFor(0), {{"127.0.0.1", cluster_->seed()}}, 2, std::move(scripts));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  static TestCluster* cluster_;
  static std::string* error_;
};
TestCluster* RedisClusterServerTest::cluster_ = nullptr;
std::string* RedisClusterServerTest::error_ = nullptr;

// The slot of every key, gnomon's own and the hash tag's edge cases, as the server computes it.
TEST_F(RedisClusterServerTest, KeySlotsMatchTheServer) {
  std::vector<std::string> keys = {"",         "a",   "{",      "}",     "{}",
                                   "{}x",      "x{}", "{a}",    "x{a}y", "{a}{b}",
                                   "{{a}}",    "a{b", "a}b{c}", "{}{a}", std::string("\0\xff{", 3),
                                   "123456789"};
  for (int i = 0; i < 400; ++i) {
    keys.push_back("gnomon:default:{job-" + std::to_string(i) + "}:state");
    std::string bytes;
    for (int b = 0; b < i % 23; ++b) bytes.push_back(static_cast<char>((i * 31 + b * 7) & 0xff));
    keys.push_back(bytes);
  }
  for (const std::string& key : keys) {
    Result<RedisReply> r = cluster_->Run(cluster_->seed(), {"CLUSTER", "KEYSLOT", key});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(ClusterKeySlot(key), r->integer) << "key of " << key.size() << " bytes: " << key;
  }
}

TEST_F(RedisClusterServerTest, CommandsGoToTheirSlotsPrimary) {
  std::unique_ptr<RedisClusterClient> client = Client();
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->Primaries().size(), 3u);
  std::set<std::string> owners;
  for (int i = 0; i < 300; ++i) {
    const std::string key = "route:{k" + std::to_string(i) + "}";
    const int slot = ClusterKeySlot(key);
    Result<RedisReply> set = client->Command(slot, {"SET", key, std::to_string(i)});
    ASSERT_EQ(Text(set), "OK") << key;
    // The key is on the primary the map names: asked there directly, it answers the value.
    const std::string owner = client->OwnerOf(slot);
    owners.insert(owner);
    EXPECT_EQ(Text(cluster_->Run(cluster_->PortOf(owner), {"GET", key})), std::to_string(i));
    EXPECT_EQ(Text(client->Command(slot, {"GET", key})), std::to_string(i));
  }
  EXPECT_EQ(owners.size(), 3u);  // 300 keys reach every primary
}

// A slot handed to another primary (CLUSTER SETSLOT ... NODE): the client's map is stale, the old
// owner answers MOVED, the command lands at the new one and the map is read again.
TEST_F(RedisClusterServerTest, AMovedSlotIsFollowedAndTheMapReadAgain) {
  std::unique_ptr<RedisClusterClient> client = Client();
  ASSERT_NE(client, nullptr);
  const std::string key = "{moved-test}";
  const int slot = ClusterKeySlot(key);
  ASSERT_EQ(
      Text(cluster_->Run(cluster_->seed(), {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)})),
      "0");
  const int from = cluster_->PortOf(client->OwnerOf(slot));
  const int to = cluster_->OtherPrimary(from);
  ASSERT_NE(to, 0);
  ASSERT_TRUE(cluster_->GiveSlot(slot, from, to));
  RealWait(RedisClusterClient::kMinRefreshGap * 2);  // past the refresh rate limit
  EXPECT_EQ(Text(client->Command(slot, {"SET", key, "v"})), "OK");
  EXPECT_EQ(Text(cluster_->Run(to, {"GET", key})), "v");
  EXPECT_EQ(client->OwnerOf(slot), "127.0.0.1:" + std::to_string(to));
}

// A read of the map that gives a slot to another primary calls the map listeners (the
// scheduler's cue to make its failed claims again); a read that changes nothing does not, nor
// one after the listener was removed.
TEST_F(RedisClusterServerTest, AMapReadThatMovesASlotCallsTheListeners) {
  std::unique_ptr<RedisClusterClient> client = Client();
  ASSERT_NE(client, nullptr);
  std::atomic<int> calls{0};
  const int handle = client->routes().Add([&] { ++calls; });
  ASSERT_TRUE(client->Refresh().ok());
  EXPECT_EQ(calls.load(), 0) << "the same map";
  const int slot = ClusterKeySlot("{listener-test}");
  const int from = cluster_->PortOf(client->OwnerOf(slot));
  const int to = cluster_->OtherPrimary(from);
  ASSERT_NE(to, 0);
  ASSERT_TRUE(cluster_->GiveSlot(slot, from, to));
  ASSERT_TRUE(client->Refresh().ok());
  EXPECT_EQ(client->OwnerOf(slot), "127.0.0.1:" + std::to_string(to));
  EXPECT_EQ(calls.load(), 1) << "the slot moved";
  client->routes().Remove(handle);
  ASSERT_TRUE(cluster_->GiveSlot(slot, to, from));
  ASSERT_TRUE(client->Refresh().ok());
  EXPECT_EQ(client->OwnerOf(slot), "127.0.0.1:" + std::to_string(from));
  EXPECT_EQ(calls.load(), 1) << "removed: not called";
}

// During a migration (MIGRATING / IMPORTING and MIGRATE of one key of two): a moved key and a
// new key are followed by ASK, a command over both halves gets TRYAGAIN until the migration
// ends; after it, the slot's commands reach the new owner.
TEST_F(RedisClusterServerTest, AMigrationIsFollowedByAskAndTryAgain) {
  std::unique_ptr<RedisClusterClient> client = Client();
  ASSERT_NE(client, nullptr);
  const std::string moved = "{ask-test}:moved";
  const std::string stays = "{ask-test}:stays";
  const std::string fresh = "{ask-test}:fresh";
  const int slot = ClusterKeySlot(moved);
  ASSERT_EQ(Text(client->Command(slot, {"SET", moved, "m"})), "OK");
  ASSERT_EQ(Text(client->Command(slot, {"SET", stays, "s"})), "OK");
  const int from = cluster_->PortOf(client->OwnerOf(slot));
  const int to = cluster_->OtherPrimary(from);
  ASSERT_NE(to, 0);
  ASSERT_TRUE(cluster_->StartMigration(slot, from, to));
  ASSERT_TRUE(cluster_->MigrateKey(moved, from, to));
  EXPECT_EQ(Text(client->Command(slot, {"GET", moved})), "m");        // ASK to the target
  EXPECT_EQ(Text(client->Command(slot, {"GET", stays})), "s");        // still at the source
  EXPECT_EQ(Text(client->Command(slot, {"SET", fresh, "f"})), "OK");  // new: ASK to the target
  Result<RedisReply> split = client->Command(slot, {"MGET", moved, stays});
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(split.status().message().find("being migrated"), std::string::npos)
      << split.status().ToString();
  // The map is unchanged by ASK: the source still owns the slot.
  EXPECT_EQ(client->OwnerOf(slot), "127.0.0.1:" + std::to_string(from));
  ASSERT_TRUE(cluster_->MigrateKey(stays, from, to));
  ASSERT_TRUE(cluster_->GiveSlot(slot, from, to));
  RealWait(RedisClusterClient::kMinRefreshGap * 2);
  Result<RedisReply> both = client->Command(slot, {"MGET", moved, stays, fresh});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_EQ(both->elements.size(), 3u);
  EXPECT_EQ(both->elements[0].str, "m");
  EXPECT_EQ(both->elements[1].str, "s");
  EXPECT_EQ(both->elements[2].str, "f");
  EXPECT_EQ(client->OwnerOf(slot), "127.0.0.1:" + std::to_string(to));
}

// Scripts run where their keys' slot lives, are loaded on each node at first use there, and
// follow a migration as commands do: ASK (ASKING goes before the EVALSHA) and TRYAGAIN.
TEST_F(RedisClusterServerTest, ScriptsAreRoutedByTheirKeysSlot) {
  std::unique_ptr<RedisClusterClient> client =
      Client({"return redis.call('INCR', KEYS[1])",
              "return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}"});
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 100; ++i) {
    const std::string key = "eval:{k" + std::to_string(i) + "}";
    const int slot = ClusterKeySlot(key);
    EXPECT_EQ(Text(client->Eval(slot, 0, {key}, {})), "1") << key;
    EXPECT_EQ(Text(client->Eval(slot, 0, {key}, {})), "2") << key;
    EXPECT_EQ(Text(cluster_->Run(cluster_->PortOf(client->OwnerOf(slot)), {"GET", key})), "2");
  }
  // A script error is the script's (Internal), not the cluster's.
  const std::string text = "eval:{text}";
  const int text_slot = ClusterKeySlot(text);
  ASSERT_EQ(Text(client->Command(text_slot, {"SET", text, "x"})), "OK");
  Result<RedisReply> error = client->Eval(text_slot, 0, {text}, {});
  EXPECT_EQ(error.status().code(), StatusCode::kInternal) << error.status().ToString();
  EXPECT_EQ(client->Eval(text_slot, 7, {text}, {}).status().code(), StatusCode::kInvalidArgument);

  const std::string moved = "{eval-migration}:moved";
  const std::string stays = "{eval-migration}:stays";
  const int slot = ClusterKeySlot(moved);
  ASSERT_EQ(Text(client->Command(slot, {"SET", moved, "10"})), "OK");
  ASSERT_EQ(Text(client->Command(slot, {"SET", stays, "20"})), "OK");
  const int from = cluster_->PortOf(client->OwnerOf(slot));
  const int to = cluster_->OtherPrimary(from);
  ASSERT_NE(to, 0);
  ASSERT_TRUE(cluster_->StartMigration(slot, from, to));
  ASSERT_TRUE(cluster_->MigrateKey(moved, from, to));
  EXPECT_EQ(Text(client->Eval(slot, 0, {moved}, {})), "11");  // ASK: run at the target
  EXPECT_EQ(Text(client->Eval(slot, 0, {stays}, {})), "21");  // still at the source
  Result<RedisReply> split = client->Eval(slot, 1, {moved, stays}, {});
  EXPECT_EQ(split.status().code(), StatusCode::kUnavailable) << split.status().ToString();
  // A claim's shape: a key that exists (the job's state, moved or not yet) and one that exists
  // nowhere yet (the new fire's marker), both declared. Redis refuses it at both ends while the
  // slot migrates (the importing node serves a multi-key command only when it holds every key:
  // TRYAGAIN), so declaring the fire scripts' keys would not let a migrating group's new fires
  // be claimed before the move ends either (docs/redis-cluster.md "Resharding").
  const std::string marker = "{eval-migration}:new-marker";
  for (const std::string& existing : {moved, stays}) {
    Result<RedisReply> claim_shape = client->Eval(slot, 1, {existing, marker}, {});
    EXPECT_EQ(claim_shape.status().code(), StatusCode::kUnavailable)
        << existing << ": " << claim_shape.status().ToString();
    EXPECT_NE(claim_shape.status().message().find("being migrated"), std::string::npos)
        << existing << ": " << claim_shape.status().ToString();
  }
  ASSERT_TRUE(cluster_->MigrateKey(stays, from, to));
  ASSERT_TRUE(cluster_->GiveSlot(slot, from, to));
  RealWait(RedisClusterClient::kMinRefreshGap * 2);
  Result<RedisReply> both = client->Eval(slot, 1, {moved, stays}, {});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_EQ(both->elements.size(), 2u);
  EXPECT_EQ(both->elements[0].str, "11");
  EXPECT_EQ(both->elements[1].str, "21");
}

// The scripts of a Cluster (Topology::kCluster) run on one primary each. The fire scripts run
// on their key group's: a claim batch and a report batch of one group's jobs, the lease index
// and the new history members in the group's own keys (the shared slot untouched), the lost-run
// scan of that group; a batch of two groups of one primary in one call, each lease in its own
// group's index; and a claim batch with a job of another primary refused before anything is
// written. A script of the shared slot runs there; a pause change from a group's slot leaves
// the jobs version to a second call in the shared slot.
TEST_F(RedisClusterServerTest, TheFireScriptsRunInTheirKeyGroupsSlot) {
  namespace scripts = redis_scripts;
  std::vector<std::string> sources;
  for (int i = 0; i < scripts::kCount; ++i) {
    sources.push_back(scripts::Source(static_cast<scripts::Id>(i), scripts::Topology::kCluster));
  }
  std::unique_ptr<RedisClusterClient> client = Client(sources);
  ASSERT_NE(client, nullptr);
  const std::string base = "gnomon:cl";
  const std::string shared = base + ":{~shared}";
  const int shared_slot = ClusterKeySlot(shared);

  // Three jobs in each of three groups, one group on each primary.
  std::map<int, std::vector<std::string>> by_group;
  for (int i = 0; i < 20000; ++i) {
    const std::string job = "job-" + std::to_string(i);
    by_group[redis::KeyGroup(job)].push_back(job);
  }
  std::map<std::string, int> group_of_primary;
  for (const auto& [group, jobs] : by_group) {
    if (jobs.size() < 3) continue;
    group_of_primary.emplace(client->OwnerOf(ClusterKeySlot(redis::GroupBase(base, group))), group);
  }
  ASSERT_EQ(group_of_primary.size(), 3u);

  const int64_t t = 1'900'000'000'000;
  auto common = [](int64_t now) {
    return std::vector<std::string>{std::to_string(now), "100", "1000", "60000"};
  };
  // Claims (kClaimItem) of `jobs`' fires at `ms`.
  auto claims = [&](const std::vector<std::string>& jobs, int64_t ms) {
    std::vector<std::string> args = common(t);
    args.push_back(std::to_string(jobs.size()));
    for (const std::string& job : jobs) {
      for (std::string v :
           {job, std::to_string(redis::KeyGroup(job)), std::to_string(ms), std::string("0"),
            std::string("1"), std::string("n1"), std::string("30000"), std::string("1000"),
            std::string("allow"), std::string(""), std::string(""),
            redis::Member(coord::RunPosition{ms, job, 0, 1})}) {
        args.push_back(std::move(v));
      }
    }
    return args;
  };
  for (const auto& [primary, group] : group_of_primary) {
    SCOPED_TRACE("group " + std::to_string(group) + " on " + primary);
    const std::string gb = redis::GroupBase(base, group);
    const int slot = ClusterKeySlot(gb);
    std::vector<std::string> jobs(by_group[group].begin(), by_group[group].begin() + 3);

    Result<RedisReply> claimed = client->Eval(slot, scripts::kClaimMany, {gb, gb}, claims(jobs, t));
    ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
    ASSERT_EQ(claimed->elements.size(), 3u);
    std::vector<std::string> tokens;
    for (const RedisReply& c : claimed->elements) {
      // "<now> <token> <lease>"
      ASSERT_EQ(c.type, RedisReply::Type::kString) << c.str;
      const size_t a = c.str.find(' ');
      tokens.push_back(c.str.substr(a + 1, c.str.find(' ', a + 1) - a - 1));
    }
    Result<RedisReply> again = client->Eval(slot, scripts::kClaimMany, {gb, gb}, claims(jobs, t));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    for (const RedisReply& c : again->elements) EXPECT_EQ(c.elements.at(0).str, "ALREADY");
    EXPECT_EQ(Text(client->Command(slot, {"ZCOUNT", gb + ":leases", "-inf", "(+inf"})), "3");
    EXPECT_EQ(Text(client->Command(slot, {"ZCARD", gb + ":runs_new"})), "3");
    EXPECT_EQ(Text(client->Command(shared_slot, {"EXISTS", shared + ":leases", shared + ":runs"})),
              "0");

    // The lost-run scan of the group, once the leases (30 s) have ended.
    std::vector<std::string> scan = common(t + 60000);
    scan.push_back("100");
    Result<RedisReply> expired = client->Eval(slot, scripts::kListExpired, {gb, gb}, scan);
    ASSERT_TRUE(expired.ok()) << expired.status().ToString();
    ASSERT_EQ(expired->elements.size(), 1u + 3 * 8);
    std::set<std::string> found;
    for (size_t i = 1; i < expired->elements.size(); i += 8) {
      found.insert(expired->elements[i].str);
    }
    EXPECT_EQ(found, std::set<std::string>(jobs.begin(), jobs.end()));

    std::vector<std::string> reports = common(t + 1000);
    reports.push_back("3");
    for (size_t k = 0; k < jobs.size(); ++k) {
      RunRecord record;
      record.shard_count = 1;
      record.fencing_token = std::stoll(tokens[k]);
      record.node_id = "n1";
      record.started_at = Instant::FromUnixMillis(t);
      record.finished_at = Instant::FromUnixMillis(t + 1000);
      record.outcome = RunOutcome::kSucceeded;
      record.exit_code = 0;
      for (std::string v :
           {jobs[k], std::to_string(redis::KeyGroup(jobs[k])), std::to_string(t) + ":0", tokens[k],
            redis::Member(coord::RunPosition{t, jobs[k], 0, 1}), std::string("1"),
            std::string("reset"), redis::EncodeRecord(record)}) {
        reports.push_back(std::move(v));
      }
    }
    Result<RedisReply> reported = client->Eval(slot, scripts::kReportMany, {gb, gb}, reports);
    ASSERT_TRUE(reported.ok()) << reported.status().ToString();
    for (const RedisReply& r : reported->elements) EXPECT_EQ(r.str, "OK");
    EXPECT_EQ(Text(client->Command(slot, {"ZCOUNT", gb + ":leases", "-inf", "(+inf"})), "0");
    // The group's index keeps its keeper, at +inf, and the skiplist encoding (LEASE_KEEPER).
    EXPECT_EQ(Text(client->Command(slot, {"OBJECT", "ENCODING", gb + ":leases"})), "skiplist");
    const std::string jb = gb + ":job:" + jobs[0];
    const std::string fid = std::to_string(t) + ":0";
    const std::optional<redis::FireMarker> marker =
        redis::ParseMarker(Text(client->Command(slot, {"HGET", jb, "m:" + fid})));
    ASSERT_TRUE(marker.has_value());
    EXPECT_FALSE(marker->open);
    const std::string member = redis::Member(coord::RunPosition{t, jobs[0], 0, 1});
    EXPECT_EQ(Text(client->Command(slot, {"HGET", jb, "r:" + member})).rfind("succeeded\n", 0), 0u);

    // A batch of this group's job and a job of another group of the same primary: one call,
    // each lease in its own group's index, the new history members in the routing group's.
    int neighbour = -1;
    for (const auto& [g, its_jobs] : by_group) {
      const std::string other_base = redis::GroupBase(base, g);
      if (g != group && client->OwnerOf(ClusterKeySlot(other_base)) == primary) {
        neighbour = g;
        break;
      }
    }
    ASSERT_NE(neighbour, -1);
    const std::string neighbour_gb = redis::GroupBase(base, neighbour);
    std::vector<std::string> pair = claims({by_group[neighbour][0], jobs[0]}, t + 250);
    Result<RedisReply> both = client->Eval(slot, scripts::kClaimMany, {gb, gb}, pair);
    ASSERT_TRUE(both.ok()) << both.status().ToString();
    ASSERT_EQ(both->elements.size(), 2u);
    for (const RedisReply& c : both->elements) EXPECT_EQ(c.type, RedisReply::Type::kString);
    EXPECT_EQ(Text(client->Command(slot, {"ZCOUNT", gb + ":leases", "-inf", "(+inf"})), "1");
    const int neighbour_slot = ClusterKeySlot(neighbour_gb);
    EXPECT_EQ(Text(client->Command(neighbour_slot,
                                   {"ZCOUNT", neighbour_gb + ":leases", "-inf", "(+inf"})),
              "1");
    EXPECT_EQ(Text(client->Command(neighbour_slot, {"EXISTS", neighbour_gb + ":runs_new"})), "0");

    // A claim batch with a job of another primary, after jobs of this one, is refused before
    // anything is written: Unavailable, as a slot the map places wrongly is.
    const int other = group_of_primary.begin()->second == group
                          ? std::next(group_of_primary.begin())->second
                          : group_of_primary.begin()->second;
    const std::string stranger = by_group[other][0];
    std::vector<std::string> mixed = claims({jobs[0], stranger}, t + 500);
    Result<RedisReply> refused = client->Eval(slot, scripts::kClaimMany, {gb, gb}, mixed);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("non local key"), std::string::npos)
        << refused.status().ToString();
    const std::string new_fid = std::to_string(t + 500) + ":0";
    EXPECT_EQ(Text(client->Command(slot, {"HEXISTS", jb, "m:" + new_fid})), "0");
    const std::string other_gb = redis::GroupBase(base, other);
    EXPECT_EQ(Text(client->Command(ClusterKeySlot(other_gb),
                                   {"HEXISTS", other_gb + ":job:" + stranger, "m:" + new_fid})),
              "0");

    // Pausing from the group's slot sets the state there and leaves the jobs version (in the
    // shared slot) to the caller's second call.
    Result<RedisReply> pause = client->Eval(slot, scripts::kSetPaused, {jb, gb},
                                            {"", "100", "1000", "60000", "1", "test"});
    ASSERT_TRUE(pause.ok()) << pause.status().ToString();
    EXPECT_EQ(Text(client->Command(slot, {"HGET", jb, "paused"})), "1");
    EXPECT_EQ(Text(client->Command(slot, {"EXISTS", gb + ":meta"})), "0");
  }

  // A script of the shared slot.
  Result<RedisReply> put = client->Eval(shared_slot, scripts::kPutJob, {shared, shared},
                                        {"", "100", "1000", "60000", "nightly", "{}", "0"});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->elements.at(0).str, "OK");
  EXPECT_EQ(Text(client->Command(shared_slot, {"HGET", shared + ":meta", "jobs_version"})),
            put->elements.at(1).str);
  Result<RedisReply> bump = client->Eval(shared_slot, scripts::kBumpJobsVersion, {shared, shared},
                                         {"", "100", "1000", "60000"});
  ASSERT_TRUE(bump.ok()) << bump.status().ToString();
  EXPECT_GT(std::stoll(bump->elements.at(1).str), std::stoll(put->elements.at(1).str));
}

// A killed primary: its replica is promoted (cluster-node-timeout 1 s), and the client, after
// the call that found the old primary gone, reads the map again and reaches the new one.
TEST(RedisClusterFailoverTest, AKilledPrimarysSlotsAreReachedAtItsPromotedReplica) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  TestCluster cluster;
  const std::string error = cluster.Start();
  ASSERT_EQ(error, "");
  Result<std::unique_ptr<RedisClusterClient>> client =
      RedisClusterClient::Connect(ConfigFor(0), {{"127.0.0.1", cluster.seed()}}, 1);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::string key = "{failover-test}";
  const int slot = ClusterKeySlot(key);
  ASSERT_EQ(Text((*client)->Command(slot, {"SET", key, "before"})), "OK");
  // At its replica (one connection per primary: WAIT counts that connection's writes). A
  // replica of a new cluster may still be syncing: asked again until it has the write.
  std::string acked;
  for (int i = 0; i < 50 && acked != "1"; ++i) {
    acked = Text((*client)->Command(slot, {"WAIT", "1", "400"}));
  }
  ASSERT_EQ(acked, "1");
  const std::string old_owner = (*client)->OwnerOf(slot);
  cluster.KillPort(cluster.PortOf(old_owner));
  EXPECT_FALSE((*client)->Command(slot, {"GET", key}).ok());  // the old primary is gone
  ASSERT_TRUE(cluster.WaitUntilServing()) << "no replica was promoted";
  // Calls fail until the map names the promoted replica (read again at most every 100 ms).
  Result<RedisReply> after = UnavailableError("not tried");
  for (int i = 0; i < 50 && !after.ok(); ++i) {
    after = (*client)->Command(slot, {"GET", key});
    if (!after.ok()) RealWait(milliseconds(100));
  }
  EXPECT_EQ(Text(after), "before");
  EXPECT_NE((*client)->OwnerOf(slot), old_owner);
  EXPECT_EQ((*client)->Primaries().size(), 3u);
  // The killed primary, which stays down, is no longer in the map: it is let go (the prober
  // then stops) rather than probed for as long as it is away.
  for (int i = 0; i < 50 && (*client)->IsDown(old_owner); ++i) RealWait(milliseconds(100));
  EXPECT_FALSE((*client)->IsDown(old_owner));
}

// A claim of `job`'s fire at `at` by node "n1", overlap allowed.
ClaimRequest RequestFor(const std::string& job, Instant at) {
  ClaimRequest req;
  req.fire.job_id = job;
  req.fire.scheduled_at = at;
  req.node_id = "n1";
  req.overlap = OverlapPolicy::kAllow;
  return req;
}

// Options for a coordinator over `cluster`, keys under `prefix`, "now" from `clock`.
RedisOptions OptionsFor(const TestCluster& cluster, const std::string& prefix,
                        gnomon::testing::FakeClock& clock) {
  RedisOptions o;
  o.cluster_seeds = {{"127.0.0.1", cluster.seed()}};
  o.prefix = prefix;
  o.clock_override = &clock;
  return o;
}

// One unreachable primary (a paused process: its port still accepts, nothing answers) holds
// back only the key groups it owns. A claim batch over three jobs on three primaries grants the
// two reachable ones and answers Unavailable for the third; the primary is then held down, so
// the next call to it fails at once without waiting for io_timeout; the lost-run scan lists the
// other primaries' expired leases instead of failing. Resumed, the primary (or, when the cluster
// failed it over meanwhile, its promoted replica) is found by the client's prober, which calls
// the routes listeners, and takes claims again.
TEST(RedisClusterFailoverTest, AnUnreachablePrimaryHoldsBackOnlyItsOwnGroups) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  TestCluster cluster;
  const std::string error = cluster.Start();
  ASSERT_EQ(error, "");
  gnomon::testing::FakeClock clock(Instant::FromUnixMillis(1'900'000'000'000));
  RedisOptions o = OptionsFor(cluster, "down", clock);
  o.io_timeout = milliseconds(500);
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Result<std::unique_ptr<RedisClusterClient>> client =
      RedisClusterClient::Connect(ConfigFor(0), {{"127.0.0.1", cluster.seed()}}, 1);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto primary_of_key = [&](const std::string& key) {
    return cluster.PortOf((*client)->OwnerOf(ClusterKeySlot(key)));
  };
  auto primary_of = [&](const std::string& job) {
    return primary_of_key(redis::GroupBase(o.prefix + ":default", redis::KeyGroup(job)));
  };
  // One job per primary; the stalled one's primary does not hold the shared slot.
  const int shared = primary_of_key(o.prefix + ":default:{~shared}");
  std::map<int, std::string> job_on;
  for (int i = 0; job_on.size() < 3 && i < 1000; ++i) {
    const std::string job = "job-" + std::to_string(i);
    job_on.try_emplace(primary_of(job), job);
  }
  ASSERT_EQ(job_on.size(), 3u);
  std::string stalled;
  std::vector<std::string> others;
  for (const auto& [port, job] : job_on) {
    if (port != shared && stalled.empty()) {
      stalled = job;
    } else {
      others.push_back(job);
    }
  }
  auto request = [&](const std::string& job, Instant at) {
    ClaimRequest req = RequestFor(job, at);
    req.lease_ttl = std::chrono::seconds(5);
    return req;
  };
  // A fire of each job is claimed and its holder vanishes: its lease ends.
  const Instant t0 = clock.Now();
  for (const auto& [port, job] : job_on) {
    Result<ClaimOutcome> held = (*c)->Claim(request(job, t0));
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    ASSERT_EQ(held->result, ClaimOutcome::Result::kClaimed);
  }
  clock.Advance(std::chrono::seconds(6));

  std::atomic<int> routes_moved{0};
  const int listener = (*c)->AddRoutesListener([&] { ++routes_moved; });
  cluster.SignalPort(primary_of(stalled), SIGSTOP);
  const Instant t1 = clock.Now();
  std::vector<Result<ClaimOutcome>> batch =
      (*c)->ClaimMany({request(others[0], t1), request(stalled, t1), request(others[1], t1)});
  const Result<ClaimOutcome> again = (*c)->Claim(request(stalled, t1 + std::chrono::seconds(1)));
  Result<std::vector<ExpiredFire>> lost = (*c)->ListExpired(10);
  cluster.SignalPort(primary_of(stalled), SIGCONT);

  ASSERT_EQ(batch.size(), 3u);
  for (size_t i : {0u, 2u}) {
    ASSERT_TRUE(batch[i].ok()) << i << ": " << batch[i].status().ToString();
    EXPECT_EQ(batch[i]->result, ClaimOutcome::Result::kClaimed) << i;
  }
  ASSERT_FALSE(batch[1].ok());
  EXPECT_EQ(batch[1].status().code(), StatusCode::kUnavailable);
  // Held down: answered without I/O.
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(again.status().message().find("held down until it answers a probe"), std::string::npos)
      << again.status().ToString();
  ASSERT_TRUE(lost.ok()) << lost.status().ToString();
  std::set<std::string> lost_jobs;
  for (const ExpiredFire& e : *lost) lost_jobs.insert(e.fire.job_id);
  EXPECT_EQ(lost_jobs, (std::set<std::string>{others[0], others[1]}));

  // Back: a probe reaches it (or the promoted replica owns its slots), which calls the routes
  // listener with no call of ours to find it out; and it claims again (a later fire: the claim
  // sent at t1 may have reached the paused server, which runs it when resumed).
  for (int i = 0; i < 100 && routes_moved.load() == 0; ++i) RealWait(milliseconds(100));
  EXPECT_GT(routes_moved.load(), 0) << "the prober found it back, and said nothing";
  (*c)->RemoveRoutesListener(listener);
  clock.Advance(std::chrono::seconds(2));
  Result<ClaimOutcome> back = UnavailableError("not tried");
  for (int i = 0; i < 100 && !back.ok(); ++i) {
    back = (*c)->Claim(request(stalled, clock.Now()));
    if (!back.ok()) RealWait(milliseconds(100));
  }
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->result, ClaimOutcome::Result::kClaimed);
  lost = (*c)->ListExpired(10);
  ASSERT_TRUE(lost.ok()) << lost.status().ToString();
  lost_jobs.clear();
  for (const ExpiredFire& e : *lost) lost_jobs.insert(e.fire.job_id);
  EXPECT_TRUE(lost_jobs.contains(stalled));
}

// A batch is one script call per primary, whatever the number of key groups its fires are in:
// 128 claims (one call's worth) over more than 100 groups cost each primary one EVALSHA, so does
// the takeover check of those fires (FiresRecorded), and
// each lease is indexed in its own group (the lost-run scan lists all 128). A group whose slot
// moved to another primary since the client read the map fails its primary's call with nothing
// written; that part of the batch goes again as one call per group, each following its slot's
// MOVED, so every fire of the batch is claimed once; the next batch, routed by the map read
// again, is one call per primary. A group being migrated is claimed nowhere meanwhile.
TEST(RedisClusterFailoverTest, ABatchIsOneCallPerPrimaryAndFollowsItsGroupsSlots) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  TestCluster cluster;
  const std::string error = cluster.Start();
  ASSERT_EQ(error, "");
  gnomon::testing::FakeClock clock(Instant::FromUnixMillis(1'900'000'000'000));
  const RedisOptions o = OptionsFor(cluster, "batch", clock);
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Result<std::unique_ptr<RedisClusterClient>> client =
      RedisClusterClient::Connect(ConfigFor(0), {{"127.0.0.1", cluster.seed()}}, 1);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto slot_of = [&](const std::string& job) {
    return ClusterKeySlot(redis::GroupBase(o.prefix + ":default", redis::KeyGroup(job)));
  };
  auto primary_of = [&](const std::string& job) {
    return cluster.PortOf((*client)->OwnerOf(slot_of(job)));
  };
  auto evalsha_calls = [&] {
    std::map<int, int64_t> out;
    for (int port : cluster.Primaries()) {
      const std::string info = Text(cluster.Run(port, {"INFO", "commandstats"}));
      const size_t at = info.find("cmdstat_evalsha:calls=");
      out[port] = at == std::string::npos ? 0 : std::stoll(info.substr(at + 22));
    }
    return out;
  };

  const Instant t0 = clock.Now();
  std::vector<ClaimRequest> reqs;
  std::set<int> groups;
  for (int i = 0; i < 128; ++i) {
    const std::string job = "job-" + std::to_string(i);
    reqs.push_back(RequestFor(job, t0));
    groups.insert(redis::KeyGroup(job));
  }
  ASSERT_GT(groups.size(), 100u);
  const std::map<int, int64_t> before = evalsha_calls();
  ASSERT_EQ(before.size(), 3u);
  const std::vector<Result<ClaimOutcome>> claimed = (*c)->ClaimMany(reqs);
  const std::map<int, int64_t> after = evalsha_calls();
  ASSERT_EQ(claimed.size(), reqs.size());
  for (const Result<ClaimOutcome>& r : claimed) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->result, ClaimOutcome::Result::kClaimed);
  }
  for (const auto& [port, calls] : after) {
    EXPECT_EQ(calls - before.at(port), 1) << "primary " << port;
  }
  // The takeover check (FiresRecorded) of the same fires: one call per primary as well.
  std::vector<FireKey> keys;
  for (const ClaimRequest& req : reqs) keys.push_back(req.fire);
  keys.push_back(RequestFor("never-claimed", t0).fire);
  const std::map<int, int64_t> before_check = evalsha_calls();
  Result<std::vector<bool>> recorded_all = (*c)->FiresRecorded(keys);
  const std::map<int, int64_t> after_check = evalsha_calls();
  ASSERT_TRUE(recorded_all.ok()) << recorded_all.status().ToString();
  ASSERT_EQ(recorded_all->size(), keys.size());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_TRUE((*recorded_all)[i]) << i;
  EXPECT_FALSE(recorded_all->back());
  for (const auto& [port, calls] : after_check) {
    EXPECT_EQ(calls - before_check.at(port), 1) << "primary " << port;
  }
  clock.Advance(std::chrono::minutes(10));  // past every lease
  Result<std::vector<ExpiredFire>> lost = (*c)->ListExpired(1000);
  ASSERT_TRUE(lost.ok()) << lost.status().ToString();
  EXPECT_EQ(lost->size(), reqs.size());

  // A job of a group no claim touched (its slot holds no key, so it can be given away) and a
  // job of a used group of the same primary; the first moves to another primary.
  std::string moved, stays;
  for (int i = 0; moved.empty(); ++i) {
    const std::string job = "x-" + std::to_string(i);
    if (!groups.contains(redis::KeyGroup(job))) moved = job;
  }
  for (const ClaimRequest& req : reqs) {
    if (primary_of(req.fire.job_id) == primary_of(moved)) stays = req.fire.job_id;
  }
  ASSERT_FALSE(stays.empty());
  const int from = primary_of(moved);
  ASSERT_TRUE(cluster.GiveSlot(slot_of(moved), from, cluster.OtherPrimary(from)));
  const Instant t1 = clock.Now();
  std::map<int, int64_t> calls = evalsha_calls();
  const std::vector<Result<ClaimOutcome>> stale =
      (*c)->ClaimMany({RequestFor(stays, t1), RequestFor(moved, t1)});
  std::map<int, int64_t> now = evalsha_calls();
  ASSERT_EQ(stale.size(), 2u);
  for (const Result<ClaimOutcome>& r : stale) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->result, ClaimOutcome::Result::kClaimed);
  }
  // The batch (refused with nothing written), then each group's call; the moved group's is
  // refused by the old owner before it runs (MOVED) and runs at the new one.
  EXPECT_EQ(now.at(from) - calls.at(from), 2);
  EXPECT_EQ(now.at(cluster.OtherPrimary(from)) - calls.at(cluster.OtherPrimary(from)), 1);
  for (const Result<ClaimOutcome>& r :
       (*c)->ClaimMany({RequestFor(stays, t1), RequestFor(moved, t1)})) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->result, ClaimOutcome::Result::kAlreadyClaimed);
  }
  RealWait(RedisClusterClient::kMinRefreshGap);  // the map is read at most that often
  clock.Advance(std::chrono::seconds(1));
  const Instant t2 = clock.Now();
  calls = evalsha_calls();
  const std::vector<Result<ClaimOutcome>> routed =
      (*c)->ClaimMany({RequestFor(stays, t2), RequestFor(moved, t2)});
  now = evalsha_calls();
  for (const Result<ClaimOutcome>& r : routed) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->result, ClaimOutcome::Result::kClaimed);
  }
  for (const auto& [port, n] : now) {
    EXPECT_LE(n - calls.at(port), 1)
        << "primary " << port << " from " << from << " to " << cluster.OtherPrimary(from);
  }

  // A group whose slot is being migrated away (MIGRATING at its primary, IMPORTING at another,
  // no key moved yet): its claims answer Unavailable and run nowhere, not at the importing node,
  // where the fire markers still at the source would read as absent; a fire it holds already is
  // not claimed a second time. Another group of the same batch and primary is claimed.
  std::string neighbour;
  for (const ClaimRequest& req : reqs) {
    if (primary_of(req.fire.job_id) == from &&
        redis::KeyGroup(req.fire.job_id) != redis::KeyGroup(stays)) {
      neighbour = req.fire.job_id;
    }
  }
  ASSERT_FALSE(neighbour.empty());
  const int importing = cluster.OtherPrimary(from);
  ASSERT_TRUE(cluster.StartMigration(slot_of(stays), from, importing));
  clock.Advance(std::chrono::seconds(1));
  const Instant t3 = clock.Now();
  calls = evalsha_calls();
  // The migrating group first: the batch is routed by its slot.
  const std::vector<Result<ClaimOutcome>> migrating =
      (*c)->ClaimMany({RequestFor(stays, t3), RequestFor(neighbour, t3), RequestFor(stays, t2)});
  now = evalsha_calls();
  ASSERT_EQ(migrating.size(), 3u);
  ASSERT_TRUE(migrating[1].ok()) << migrating[1].status().ToString();
  EXPECT_EQ(migrating[1]->result, ClaimOutcome::Result::kClaimed);
  for (size_t i : {0u, 2u}) {
    ASSERT_FALSE(migrating[i].ok()) << i;
    EXPECT_EQ(migrating[i].status().code(), StatusCode::kUnavailable);
    EXPECT_NE(migrating[i].status().message().find("is being migrated"), std::string::npos)
        << migrating[i].status().ToString();
  }
  EXPECT_EQ(now.at(importing), calls.at(importing)) << "a script ran at the importing node";
}

// rediss+cluster://: a cluster whose nodes serve TLS only, to clients and between themselves.
// The slot map names their TLS ports; a claim batch and a report batch over jobs of all three
// primaries, a definition (the shared slot) and the history go over TLS, each primary's
// certificate checked against the address the map names. With another CA, Open fails naming
// the seed.
TEST(RedisClusterTlsTest, AClusterServingTlsOnlyIsUsedOverRediss) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  if (!testing::HaveOpenssl()) GTEST_SKIP() << "openssl is not installed";
  testing::TestCertificates certs;
  ASSERT_TRUE(certs.ok()) << certs.Log();
  TestCluster cluster(&certs);
  const std::string error = cluster.Start();
  ASSERT_EQ(error, "");
  const std::string seed = "127.0.0.1:" + std::to_string(cluster.seed());
  gnomon::testing::FakeClock clock(Instant::FromUnixMillis(1'900'000'000'000));
  // What rediss+cluster://<seed>?tls_ca=<ca> gives (src/server/backend.cc).
  RedisOptions o = OptionsFor(cluster, "tls", clock);
  o.tls.enabled = true;
  o.tls.ca_file = certs.ca();
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();

  Result<std::unique_ptr<RedisClusterClient>> client = RedisClusterClient::Connect(
      [&] {
        RedisConnectionConfig config = ConfigFor(0);
        config.tls = RedisTlsContext::Create(o.tls).value();
        return config;
      }(),
      {{"127.0.0.1", cluster.seed()}}, 1);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::vector<ClaimRequest> reqs;
  std::set<std::string> primaries;
  for (int i = 0; i < 30; ++i) {
    const std::string job = "job-" + std::to_string(i);
    reqs.push_back(RequestFor(job, clock.Now()));
    primaries.insert((*client)->OwnerOf(
        ClusterKeySlot(redis::GroupBase(o.prefix + ":default", redis::KeyGroup(job)))));
  }
  ASSERT_EQ(primaries.size(), 3u);
  const std::vector<Result<ClaimOutcome>> claimed = (*c)->ClaimMany(reqs);
  std::vector<RunRecord> records;
  for (const Result<ClaimOutcome>& r : claimed) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->result, ClaimOutcome::Result::kClaimed);
    ASSERT_TRUE(r->claim.has_value());
    records.push_back(gnomon::testing::conformance::RecordOf(*r->claim, RunOutcome::kSucceeded,
                                                             clock.Now(), clock.Now()));
  }
  std::vector<ReportRequest> reports;
  for (size_t i = 0; i < claimed.size(); ++i) {
    reports.push_back({&*claimed[i]->claim, &records[i], /*final=*/true});
  }
  for (const Status& s : (*c)->ReportMany(reports)) EXPECT_TRUE(s.ok()) << s.ToString();
  Result<int64_t> put = (*c)->PutJob("nightly", "{}", 0);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  Result<StoredJob> got = (*c)->GetJob("nightly");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->definition, "{}");
  RunQuery all;
  all.limit = 100;
  Result<RunPage> page = (*c)->ListRuns(all);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->runs.size(), reqs.size());
  for (const RunRecord& r : page->runs) EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.run_id;

  o.tls.ca_file = certs.other_ca();
  Result<std::unique_ptr<RedisCoordinator>> untrusted = RedisCoordinator::Open(o);
  ASSERT_FALSE(untrusted.ok());
  EXPECT_NE(untrusted.status().message().find(seed), std::string::npos)
      << untrusted.status().ToString();
}

// --- The coordinator conformance suite over a real cluster ----------------------------------

// The cluster the suite shares (each test uses its own key prefix), started on first use and
// stopped when the test program ends.
std::unique_ptr<TestCluster>& SharedClusterSlot() {
  static auto* slot = new std::unique_ptr<TestCluster>();
  return *slot;
}
TestCluster* SharedCluster() {
  std::unique_ptr<TestCluster>& slot = SharedClusterSlot();
  if (!slot) {
    slot = std::make_unique<TestCluster>();
    const std::string error = slot->Start();
    EXPECT_EQ(error, "");
  }
  return slot.get();
}

class SharedClusterEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SharedClusterSlot().reset(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new SharedClusterEnvironment);

std::vector<gnomon::testing::CoordinatorFactory> ClusterFactories() {
  if (access(kRedisServer, X_OK) != 0 || access(kRedisCli, X_OK) != 0) return {};
  return {{"RedisCluster",
           [](gnomon::testing::FakeClock* clock) -> std::unique_ptr<Coordinator> {
             static std::atomic<int> n{0};
             RedisOptions o;
             o.cluster_seeds = {{"127.0.0.1", SharedCluster()->seed()}};
             o.prefix = "c" + std::to_string(getpid()) + "-" + std::to_string(n.fetch_add(1));
             o.clock_override = clock;
             o.connections = 2;
             Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
             EXPECT_TRUE(c.ok()) << c.status().ToString();
             if (!c.ok()) return nullptr;
             return std::move(*c);
           },
           true}};
}

// Options for a coordinator over the shared cluster, keys under `prefix`, "now" from `clock`.
RedisOptions ClusterOptions(const std::string& prefix, gnomon::testing::FakeClock& clock) {
  return OptionsFor(*SharedCluster(), prefix + std::to_string(getpid()), clock);
}

// Options a Cluster cannot honour are refused before anything is connected.
TEST(RedisClusterCoordinatorTest, OptionsAClusterCannotHonourAreRefused) {
  RedisOptions o;
  o.cluster_seeds = {{"127.0.0.1", 1}};
  o.sentinels = {{"127.0.0.1", 2}};
  o.sentinel_master = "m";
  EXPECT_EQ(RedisCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
  o.sentinels.clear();
  o.db = 1;
  EXPECT_EQ(RedisCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
  o.db = 0;
  o.cluster_seeds = {{"", 6379}};
  EXPECT_EQ(RedisCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
}

// wait_replicas under a Cluster: each primary's claim call waits for the replicas of that
// primary. With the replica of one primary stopped, a claim of a group there answers
// Unavailable and is taken back (the fire reads as never claimed), an answer that grants nothing
// (already claimed) stands, and a claim of a group on another primary goes through.
TEST(RedisClusterCoordinatorTest, ClaimsWaitForTheReplicasOfTheirPrimary) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  TestCluster* cluster = SharedCluster();
  gnomon::testing::FakeClock clock(Instant::FromUnixMillis(1'900'000'000'000));
  RedisOptions o = ClusterOptions("wait", clock);
  o.wait_replicas = 1;
  o.wait_timeout = milliseconds(1500);
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Result<std::unique_ptr<RedisClusterClient>> client =
      RedisClusterClient::Connect(ConfigFor(0), {{"127.0.0.1", cluster->seed()}}, 1);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto primary_of = [&](const std::string& job) {
    const std::string gb = redis::GroupBase(o.prefix + ":default", redis::KeyGroup(job));
    return cluster->PortOf((*client)->OwnerOf(ClusterKeySlot(gb)));
  };
  // Two jobs whose groups are on different primaries.
  const std::string stalled = "job-0";
  std::string other;
  for (int i = 1; other.empty(); ++i) {
    const std::string job = "job-" + std::to_string(i);
    if (primary_of(job) != primary_of(stalled)) other = job;
  }
  auto claim = [&](const std::string& job, Instant at) {
    return (*c)->ClaimMany({RequestFor(job, at)}).front();
  };
  const Instant t0 = clock.Now();
  Result<ClaimOutcome> both_up = claim(stalled, t0);
  ASSERT_TRUE(both_up.ok()) << both_up.status().ToString();
  EXPECT_EQ(both_up->result, ClaimOutcome::Result::kClaimed);

  const int replica = cluster->ReplicaOf(primary_of(stalled));
  ASSERT_NE(replica, 0);
  cluster->SignalPort(replica, SIGSTOP);
  clock.Advance(std::chrono::seconds(1));
  Result<ClaimOutcome> refused = claim(stalled, clock.Now());
  Result<ClaimOutcome> elsewhere = claim(other, clock.Now());
  // An answer that grants nothing stands: the fire of t0 is held already.
  Result<ClaimOutcome> held = claim(stalled, t0);
  cluster->SignalPort(replica, SIGCONT);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(held->result, ClaimOutcome::Result::kAlreadyClaimed);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("acknowledged by 0 of 1"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("its claims were withdrawn"), std::string::npos)
      << refused.status().ToString();
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status().ToString();
  EXPECT_EQ(elsewhere->result, ClaimOutcome::Result::kClaimed);
  FireKey withdrawn;
  withdrawn.job_id = stalled;
  withdrawn.scheduled_at = clock.Now();
  Result<std::vector<bool>> recorded = (*c)->FiresRecorded({withdrawn});
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_FALSE(recorded->front());
  // With the replica back, the fire's retry claims it.
  Result<ClaimOutcome> retried = claim(stalled, clock.Now());
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ(retried->result, ClaimOutcome::Result::kClaimed);
}

// Under a Cluster a waiter in WaitJobsChange listens on the shared slot's primary (SSUBSCRIBE to
// the sharded events channel, which the scripts SPUBLISH to): that primary counts one subscriber
// of the channel while it waits, and a definition put through another coordinator wakes it with
// the new version.
TEST(RedisClusterCoordinatorTest, AWaiterHearsChangesOnTheShardedChannel) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  TestCluster* cluster = SharedCluster();
  gnomon::testing::FakeClock clock(Instant::FromUnixMillis(1'900'000'000'000));
  RedisOptions o = ClusterOptions("events", clock);
  Result<std::unique_ptr<RedisCoordinator>> waiter = RedisCoordinator::Open(o);
  ASSERT_TRUE(waiter.ok()) << waiter.status().ToString();
  Result<std::unique_ptr<RedisCoordinator>> writer = RedisCoordinator::Open(o);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  Result<std::unique_ptr<RedisClusterClient>> client =
      RedisClusterClient::Connect(ConfigFor(0), {{"127.0.0.1", cluster->seed()}}, 1);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::string shared = o.prefix + ":default:{~shared}";
  auto subscribers = [&] {
    Result<RedisReply> r =
        (*client)->Command(ClusterKeySlot(shared), {"PUBSUB", "SHARDNUMSUB", shared + ":events"});
    return r.ok() && r->elements.size() == 2 ? r->elements[1].integer : -1;
  };
  Result<int64_t> before = (*waiter)->JobsVersion();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(subscribers(), 0);

  Result<int64_t> woke = UnavailableError("not woken");
  std::thread wait([&] { woke = (*waiter)->WaitJobsChange(*before, std::chrono::seconds(60)); });
  bool listening = false;
  for (int i = 0; i < 500 && !listening; ++i) {
    listening = subscribers() == 1;
    if (!listening) RealWait(milliseconds(20));
  }
  Result<int64_t> put = (*writer)->PutJob("nightly", "{}", 0);
  wait.join();
  ASSERT_TRUE(listening) << "no SSUBSCRIBE on the shared slot's primary";
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  ASSERT_TRUE(woke.ok()) << woke.status().ToString();
  EXPECT_EQ(*woke, *put);
}

// Under a Cluster a new record reaches the all-jobs listing through its group's runs_new: the
// claim's caller copies it right after the script. A copy that did not happen (the node died in
// between) is made by a later ListExpired (each housekeeping pass) once the member is a second
// old; meanwhile the record is listed under its job.
TEST(RedisClusterCoordinatorTest, ANewRunItsCopyMissedIsSweptIntoTheListing) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  TestCluster* cluster = SharedCluster();
  gnomon::testing::FakeClock clock(Instant::FromUnixMillis(1'900'000'000'000));
  RedisOptions o = ClusterOptions("sweep", clock);
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Result<ClaimOutcome> claimed = (*c)->Claim(RequestFor("nightly", clock.Now()));
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  ASSERT_EQ(claimed->result, ClaimOutcome::Result::kClaimed);
  RunQuery all;
  all.limit = 10;
  RunQuery mine = all;
  mine.job_id = "nightly";
  auto listed = [&](const RunQuery& q) {
    Result<RunPage> page = (*c)->ListRuns(q);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    return page.ok() ? page->runs.size() : size_t{99};
  };
  EXPECT_EQ(listed(all), 1u);

  // Undo the copy, as if the node had died right after the claim's script.
  Result<std::unique_ptr<RedisClusterClient>> connected =
      RedisClusterClient::Connect(ConfigFor(0), {{"127.0.0.1", cluster->seed()}}, 1);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  std::unique_ptr<RedisClusterClient> client = std::move(*connected);
  const std::string shared = o.prefix + ":default:{~shared}";
  const std::string gb = redis::GroupBase(o.prefix + ":default", redis::KeyGroup("nightly"));
  Result<RedisReply> members =
      client->Command(ClusterKeySlot(shared), {"ZRANGE", shared + ":runs", "0", "-1"});
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members->elements.size(), 1u);
  const std::string m = members->elements[0].str;
  ASSERT_EQ(Text(client->Command(ClusterKeySlot(shared), {"ZREM", shared + ":runs", m})), "1");
  ASSERT_EQ(
      Text(client->Command(ClusterKeySlot(gb), {"ZADD", gb + ":runs_new",
                                                std::to_string(clock.Now().unix_millis()), m})),
      "1");
  EXPECT_EQ(listed(all), 0u);
  EXPECT_EQ(listed(mine), 1u);
  ASSERT_TRUE((*c)->ListExpired(10).ok());  // younger than a second: left to its own copy
  EXPECT_EQ(listed(all), 0u);
  clock.Advance(std::chrono::seconds(1));
  ASSERT_TRUE((*c)->ListExpired(10).ok());
  EXPECT_EQ(listed(all), 1u);
  EXPECT_EQ(Text(client->Command(ClusterKeySlot(gb), {"ZCARD", gb + ":runs_new"})), "0");
}

// Under a Cluster max_records_total bounds the all-jobs listing: the oldest instants leave it,
// and their records stay listed under their jobs.
TEST(RedisClusterCoordinatorTest, TheAllJobsListingKeepsMaxRecordsTotal) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  gnomon::testing::FakeClock clock(Instant::FromUnixMillis(1'900'000'000'000));
  RedisOptions o = ClusterOptions("cap", clock);
  o.max_records_total = 5;
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Instant t0 = clock.Now();
  for (int i = 0; i < 8; ++i) {
    ClaimRequest req = RequestFor("job-" + std::to_string(i), t0 + std::chrono::seconds(i));
    req.skew_tolerance = std::chrono::seconds(10);
    Result<ClaimOutcome> claimed = (*c)->Claim(req);
    ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
    ASSERT_EQ(claimed->result, ClaimOutcome::Result::kClaimed) << i;
  }
  RunQuery all;
  all.limit = 100;
  Result<RunPage> page = (*c)->ListRuns(all);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  std::vector<std::string> jobs;
  for (const RunRecord& r : page->runs) jobs.push_back(r.job_id);
  EXPECT_EQ(jobs, (std::vector<std::string>{"job-7", "job-6", "job-5", "job-4", "job-3"}));
  RunQuery first = all;
  first.job_id = "job-0";
  page = (*c)->ListRuns(first);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->runs.size(), 1u);
}

// A Cluster's keyspace of the key-group layout (its groups spread over the three primaries) is
// moved to the ledger layout with nothing lost: each move's script runs on its group's primary
// and touches that slot's keys only (CheckKeyGroupMigration says what is checked).
TEST(RedisClusterCoordinatorTest, AKeyspaceOfTheKeyGroupLayoutIsMigratedWithNothingLost) {
  SKIP_WITHOUT_REDIS_CLUSTER_TOOLS();
  TestCluster* cluster = SharedCluster();
  gnomon::testing::FakeClock clock(Instant::FromUnixMillis(1'900'000'000'000));
  Result<std::unique_ptr<RedisClusterClient>> client =
      RedisClusterClient::Connect(ConfigFor(0), {{"127.0.0.1", cluster->seed()}}, 1);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::vector<int> primaries = cluster->Primaries();
  ASSERT_EQ(primaries.size(), 3u);
  gnomon::testing::CheckKeyGroupMigration(
      [&](const std::string& key, const std::vector<std::string>& argv) {
        Result<RedisReply> r = (*client)->Command(ClusterKeySlot(key), argv);
        return r.ok() ? Text(r) : std::string();
      },
      [&](const std::string& pattern) {
        std::vector<std::string> out;
        for (int port : primaries) {
          Result<RedisReply> r = cluster->Run(port, {"KEYS", pattern});
          EXPECT_TRUE(r.ok() && r->type == RedisReply::Type::kArray) << port;
          if (!r.ok()) continue;
          for (const RedisReply& key : r->elements) out.push_back(key.str);
        }
        return out;
      },
      ClusterOptions("groups", clock), clock);
}

}  // namespace
}  // namespace gnomon::coord

namespace gnomon::testing {
// Not GNOMON_INSTANTIATE_COORDINATOR_CONFORMANCE: without redis-server and redis-cli there is
// no backend to instantiate the suite with.
INSTANTIATE_TEST_SUITE_P(Backend, CoordinatorConformanceTest,
                         ::testing::ValuesIn(gnomon::coord::ClusterFactories()),
                         ::gnomon::testing::CoordinatorFactoryName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CoordinatorConformanceTest);
}  // namespace gnomon::testing
