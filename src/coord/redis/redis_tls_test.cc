// RedisCoordinator and RedisQueue over TLS (`rediss://`), against real redis-server and Redis
// Sentinel processes that serve TLS only, with certificates made by the openssl command line
// (redis_tls_testing.h; ctest label "integration"). Every test that needs them skips when
// /usr/bin/redis-server or /usr/bin/openssl is missing.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include "gnomon/redis_coordinator.h"
#include "gnomon/redis_queue.h"
#include "src/coord/coordinator_conformance.h"
#include "src/coord/redis/redis_tls_testing.h"

namespace gnomon::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;
using R = ClaimOutcome::Result;

#define SKIP_WITHOUT_TOOLS()                                                        \
  do {                                                                              \
    if (!HaveRedisTlsTools()) GTEST_SKIP() << "redis-server or openssl is missing"; \
  } while (false)

// The certificates and the TLS server the tests share (each test uses its own key prefix), made
// on first use and removed when the test program ends.
struct Shared {
  TestCertificates certs;
  std::unique_ptr<TlsRedisServer> server;
};
std::unique_ptr<Shared>& SharedSlot() {
  static auto* slot = new std::unique_ptr<Shared>();
  return *slot;
}
Shared& Get() {
  std::unique_ptr<Shared>& slot = SharedSlot();
  if (!slot) {
    slot = std::make_unique<Shared>();
    EXPECT_TRUE(slot->certs.ok()) << "openssl failed; see " << slot->certs.File("openssl.log");
    slot->server = std::make_unique<TlsRedisServer>(slot->certs, TlsRedisServer::Options{});
    EXPECT_TRUE(slot->server->Start()) << "redis-server with TLS did not start";
  }
  return *slot;
}
const TestCertificates& Certs() { return Get().certs; }

class SharedEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SharedSlot().reset(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new SharedEnvironment);

std::string UniquePrefix() {
  static std::atomic<int> n{0};
  return "tls" + std::to_string(getpid()) + "-" + std::to_string(n.fetch_add(1));
}

// Options for the server at 127.0.0.1:`port` over TLS trusting the test CA.
RedisOptions TlsOptionsFor(int port) {
  RedisOptions o;
  o.port = port;
  o.prefix = UniquePrefix();
  o.tls = Trusting(Certs());
  o.connections = 2;
  return o;
}

std::string ErrorOf(const RedisOptions& o) {
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  EXPECT_FALSE(c.ok()) << "opened although it should not";
  return c.ok() ? std::string() : c.status().ToString();
}

std::string Peer(int port) { return "redis 127.0.0.1:" + std::to_string(port) + ": "; }

FireKey Fire(const std::string& job, Instant at) {
  FireKey f;
  f.job_id = job;
  f.scheduled_at = at;
  return f;
}

ClaimRequest Req(const FireKey& fire) {
  ClaimRequest r;
  r.fire = fire;
  r.node_id = "n";
  r.overlap = OverlapPolicy::kAllow;
  return r;
}

// Opens `o` and claims a fire on the server's clock: the link works end to end.
void ExpectWorks(const RedisOptions& o) {
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Result<Instant> now = (*c)->Now();
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  Result<ClaimOutcome> out = (*c)->Claim(Req(Fire("j", *now - seconds(1))));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->result, R::kClaimed);
}

// --- The conformance suite over rediss:// -------------------------------------------------------

std::vector<CoordinatorFactory> TlsFactories() {
  if (!HaveRedisTlsTools()) return {};  // nothing to run against: the suite is not instantiated
  return {{"RedisTls",
           [](FakeClock* clock) -> std::unique_ptr<Coordinator> {
             RedisOptions o = TlsOptionsFor(Get().server->port());
             o.connections = 8;  // the default, as in production
             o.clock_override = clock;
             Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
             EXPECT_TRUE(c.ok()) << c.status().ToString();
             if (!c.ok()) return nullptr;
             return std::move(*c);
           },
           true}};
}

// Not GNOMON_INSTANTIATE_COORDINATOR_CONFORMANCE: its Values() cannot be empty, and without
// redis-server there is no backend to instantiate the suite with.
INSTANTIATE_TEST_SUITE_P(Backend, CoordinatorConformanceTest, ::testing::ValuesIn(TlsFactories()),
                         ::gnomon::testing::CoordinatorFactoryName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CoordinatorConformanceTest);

// --- Verification -------------------------------------------------------------------------------

TEST(RedisTlsTest, TheRightCaWorksAndPlainTcpIsRefused) {
  SKIP_WITHOUT_TOOLS();
  const int port = Get().server->port();
  ExpectWorks(TlsOptionsFor(port));
  // The server speaks TLS only: a plain client does not get through.
  RedisOptions plain = TlsOptionsFor(port);
  plain.tls = TlsOptions{};
  plain.io_timeout = milliseconds(500);
  EXPECT_THAT(ErrorOf(plain), HasSubstr(Peer(port)));
}

TEST(RedisTlsTest, AWrongCaFailsAtOpenNamingThePeer) {
  SKIP_WITHOUT_TOOLS();
  const int port = Get().server->port();
  RedisOptions o = TlsOptionsFor(port);
  o.tls.ca_file = Certs().other_ca();
  const std::string error = ErrorOf(o);
  EXPECT_THAT(error, HasSubstr("Unavailable"));
  EXPECT_THAT(error, HasSubstr(Peer(port) + "TLS: certificate verify failed ("));
  // The system's CAs (no tls_ca) do not know the test CA either.
  o.tls.ca_file.clear();
  EXPECT_THAT(ErrorOf(o), HasSubstr(Peer(port) + "TLS: certificate verify failed ("));
  // The queue too.
  o.tls.ca_file = Certs().other_ca();
  Result<std::unique_ptr<RedisQueue>> q = RedisQueue::Open(o);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(q.status().message(), HasSubstr(Peer(port) + "TLS: certificate verify failed ("));
}

TEST(RedisTlsTest, TheServerNameIsChecked) {
  SKIP_WITHOUT_TOOLS();
  const int port = Get().server->port();
  RedisOptions o = TlsOptionsFor(port);
  o.tls.server_name = "wrong.example";
  EXPECT_THAT(ErrorOf(o),
              HasSubstr(Peer(port) + "TLS: certificate verify failed (hostname mismatch; expected "
                                     "\"wrong.example\")"));
  o.tls.server_name = "127.0.0.2";
  EXPECT_THAT(ErrorOf(o), HasSubstr("IP address mismatch; expected \"127.0.0.2\""));
  // The certificate names localhost (DNS) and 127.0.0.1 (IP): both pass.
  o.tls.server_name = "localhost";
  ExpectWorks(o);
  // By default the name is the host connected to.
  o.tls.server_name.clear();
  o.host = "localhost";
  ExpectWorks(o);
}

TEST(RedisTlsTest, SelfSignedAndExpiredCertificatesFailUnlessVerificationIsOff) {
  SKIP_WITHOUT_TOOLS();
  TlsRedisServer::Options self_signed;
  self_signed.cert_file = Certs().File("self.crt");
  self_signed.key_file = Certs().File("self.key");
  TlsRedisServer server(Certs(), self_signed);
  ASSERT_TRUE(server.Start()) << server.Log();
  RedisOptions o = TlsOptionsFor(server.port());
  EXPECT_THAT(ErrorOf(o), HasSubstr(Peer(server.port()) + "TLS: certificate verify failed ("));
  o.tls.ca_file.clear();
  EXPECT_THAT(ErrorOf(o), HasSubstr("self-signed certificate"));
  o.tls.verify = false;
  ExpectWorks(o);

  TlsRedisServer::Options expired;
  expired.cert_file = Certs().File("expired.crt");
  TlsRedisServer old(Certs(), expired);
  ASSERT_TRUE(old.Start()) << old.Log();
  RedisOptions e = TlsOptionsFor(old.port());
  EXPECT_THAT(ErrorOf(e), HasSubstr(Peer(old.port()) +
                                    "TLS: certificate verify failed (certificate has expired)"));
}

TEST(RedisTlsTest, MutualTlsNeedsTheClientCertificate) {
  SKIP_WITHOUT_TOOLS();
  TlsRedisServer::Options mutual;
  mutual.auth_clients = "yes";
  TlsRedisServer server(Certs(), mutual);
  ASSERT_TRUE(server.Start()) << server.Log();
  RedisOptions o = TlsOptionsFor(server.port());
  o.tls = Trusting(Certs(), /*client_cert=*/true);
  ExpectWorks(o);
  Result<std::unique_ptr<RedisQueue>> q = RedisQueue::Open(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE((*q)->Publish("default", "x").ok());

  o.tls = Trusting(Certs(), /*client_cert=*/false);
  const std::string error = ErrorOf(o);
  EXPECT_THAT(error, HasSubstr("Unavailable"));
  EXPECT_THAT(error, HasSubstr(Peer(server.port())));
  EXPECT_THAT(error, HasSubstr("the server asked for a client certificate and none is configured"));
  q = RedisQueue::Open(o);
  EXPECT_FALSE(q.ok());
}

TEST(RedisTlsTest, UnreadableFilesAreInvalidArguments) {
  RedisOptions o;
  o.tls.enabled = true;
  o.tls.ca_file = "/nonexistent/ca.pem";
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("tls_ca \"/nonexistent/ca.pem\""));
  SKIP_WITHOUT_TOOLS();
  o.tls = Trusting(Certs(), /*client_cert=*/true);
  o.tls.key_file = Certs().File("server.key");  // not the client certificate's key
  c = RedisCoordinator::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("tls_key \"" + o.tls.key_file + "\""));
  o.tls = TlsOptions{};
  o.tls.ca_file = Certs().ca();  // set while TLS is off
  EXPECT_EQ(RedisCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
}

// --- Passwords ----------------------------------------------------------------------------------

TEST(RedisTlsTest, AuthOverTlsAndThePasswordIsNeverInAnError) {
  SKIP_WITHOUT_TOOLS();
  const std::string password = "Tls-S3cr3t-Pa55word";
  TlsRedisServer::Options with_password;
  with_password.password = password;
  TlsRedisServer server(Certs(), with_password);
  ASSERT_TRUE(server.Start()) << server.Log();
  const std::string port = std::to_string(server.port());

  Result<RedisOptions> url =
      ParseRedisUrl("rediss://:" + password + "@127.0.0.1:" + port + "/2?tls_ca=" + Certs().ca());
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  url->prefix = UniquePrefix();
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(*url);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->PutJob("x", "{}", 0).ok());

  std::vector<std::string> errors;
  RedisOptions wrong = *url;
  wrong.password = password + "-wrong";
  errors.push_back(ErrorOf(wrong));
  EXPECT_THAT(errors.back(), HasSubstr("AUTH failed"));
  RedisOptions wrong_ca = *url;
  wrong_ca.tls.ca_file = Certs().other_ca();
  errors.push_back(ErrorOf(wrong_ca));
  EXPECT_THAT(errors.back(), HasSubstr("certificate verify failed"));
  Result<RedisOptions> bad_url =
      ParseRedisUrl("rediss://u:" + password + "@127.0.0.1:" + port + "?tls_bogus=1");
  ASSERT_FALSE(bad_url.ok());
  errors.push_back(bad_url.status().ToString());
  EXPECT_THAT(errors.back(), HasSubstr("tls_bogus"));
  // After the server went away.
  server.Kill();
  Result<int64_t> gone = (*c)->JobsVersion();
  ASSERT_FALSE(gone.ok());
  errors.push_back(gone.status().ToString());
  for (const std::string& e : errors) EXPECT_THAT(e, Not(HasSubstr(password)));
}

// --- Sentinel -----------------------------------------------------------------------------------

TEST(RedisTlsTest, ASentinelOverTlsNamesThePrimary) {
  SKIP_WITHOUT_TOOLS();
  const int primary = Get().server->port();
  TlsRedisServer::Options sentinel_options;
  sentinel_options.sentinel_of = primary;
  TlsRedisServer sentinel(Certs(), sentinel_options);
  ASSERT_TRUE(sentinel.Start()) << sentinel.Log();

  RedisOptions o = TlsOptionsFor(1);  // host and port come from the sentinel
  o.host = "192.0.2.1";               // not used
  o.sentinels = {{"127.0.0.1", FreeLoopbackPort()}, {"localhost", sentinel.port()}};
  o.sentinel_master = "mymaster";
  ExpectWorks(o);
  Result<std::unique_ptr<RedisQueue>> q = RedisQueue::Open(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE((*q)->Publish("default", "x").ok());

  // The sentinels are verified like the server: a wrong CA names the sentinel.
  o.tls.ca_file = Certs().other_ca();
  EXPECT_THAT(ErrorOf(o), HasSubstr("sentinel localhost:" + std::to_string(sentinel.port()) +
                                    ": TLS: certificate verify failed ("));
}

// --- Queue, events, reconnects ------------------------------------------------------------------

TEST(RedisTlsTest, QueueOverTls) {
  SKIP_WITHOUT_TOOLS();
  RedisOptions o = TlsOptionsFor(Get().server->port());
  Result<std::unique_ptr<RedisQueue>> q = RedisQueue::Open(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  RedisQueue& queue = **q;
  const std::string big(100'000, 'p');  // several TLS records each way
  ASSERT_TRUE(queue.Publish("default", "one").ok());
  ASSERT_TRUE(queue.Publish("default", big).ok());
  Result<std::vector<QueueEntry>> taken =
      queue.Take({"default"}, "w1", 10, milliseconds(10), hours(1));
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  ASSERT_EQ(taken->size(), 2u);
  EXPECT_EQ((*taken)[0].payload, "one");
  EXPECT_EQ((*taken)[1].payload, big);
  ASSERT_TRUE(queue.Touch(*taken, "w1").ok());
  for (const QueueEntry& e : *taken) ASSERT_TRUE(queue.Done(e).ok());
  EXPECT_EQ(*queue.Length("default"), 0);
  // A blocking take that times out leaves the connection usable.
  Result<std::vector<QueueEntry>> none =
      queue.Take({"default"}, "w1", 10, milliseconds(100), hours(1));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(*queue.Length("default"), 0);
}

TEST(RedisTlsTest, WaitJobsChangeWakesAndTimesOutOverTls) {
  SKIP_WITHOUT_TOOLS();
  RedisOptions o = TlsOptionsFor(Get().server->port());
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  Result<std::unique_ptr<RedisCoordinator>> other = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok() && other.ok());
  Result<int64_t> v = (*c)->JobsVersion();
  ASSERT_TRUE(v.ok());
  // No change: returns the same version after the timeout, not before.
  const Duration start = SystemClock::Get().SteadyNow();
  Result<int64_t> same = (*c)->WaitJobsChange(*v, milliseconds(300));
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, *v);
  EXPECT_GE(SystemClock::Get().SteadyNow() - start, milliseconds(290));
  // A change by another node wakes the waiter long before its timeout.
  Result<int64_t> woke = InternalError("not run");
  std::thread waiter([&] { woke = (*c)->WaitJobsChange(*v, seconds(60)); });
  RealWait(milliseconds(200));
  const Duration changed_at = SystemClock::Get().SteadyNow();
  ASSERT_TRUE((*other)->SetPaused("job", true, "api").ok());
  waiter.join();
  EXPECT_LT(SystemClock::Get().SteadyNow() - changed_at, seconds(5));
  ASSERT_TRUE(woke.ok()) << woke.status().ToString();
  EXPECT_EQ(*woke, *(*other)->JobsVersion());
}

TEST(RedisTlsTest, ReconnectsAfterTheServerRestarts) {
  SKIP_WITHOUT_TOOLS();
  TlsRedisServer server(Certs(), TlsRedisServer::Options{});
  ASSERT_TRUE(server.Start()) << server.Log();
  RedisOptions o = TlsOptionsFor(server.port());
  o.reconnect_backoff_min = milliseconds(50);
  o.reconnect_backoff_max = milliseconds(100);
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->PutJob("x", "{}", 0).ok());
  server.Kill();
  Result<int64_t> down = (*c)->JobsVersion();
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(down.status().message(), HasSubstr(Peer(server.port())));
  ASSERT_TRUE(server.Start()) << server.Log();
  Result<std::vector<StoredJob>> jobs = InternalError("not tried");
  for (int i = 0; i < 100 && !jobs.ok(); ++i) {
    jobs = (*c)->ListJobs();
    if (!jobs.ok()) RealWait(milliseconds(50));
  }
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);  // the AOF kept it
  EXPECT_EQ((*jobs)[0].job_id, "x");
}

TEST(RedisTlsTest, TlsToAPlainServerFailsAtOpen) {
  SKIP_WITHOUT_TOOLS();
  // A plain listener that accepts and never answers, like a server that is not speaking TLS:
  // the handshake is bounded by connect_timeout.
  RedisOptions o = TlsOptionsFor(Get().server->port());
  o.port = FreeLoopbackPort();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  o.connect_timeout = milliseconds(300);
  const Duration start = SystemClock::Get().SteadyNow();
  EXPECT_THAT(ErrorOf(o), HasSubstr(Peer(o.port) + "TLS: handshake timed out"));
  EXPECT_LT(SystemClock::Get().SteadyNow() - start, seconds(3));
  close(fd);
}

// --- URLs ---------------------------------------------------------------------------------------

TEST(RedisTlsUrlTest, ParsesTheTlsParameters) {
  Result<RedisOptions> o = ParseRedisUrl(
      "rediss://ops:p%3Fss@redis.example:6380/2?tls_ca=/etc/ca.pem&tls_cert=/etc/c%26.pem"
      "&tls_key=/etc/c.key&tls_server_name=redis.internal&tls_verify=false");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->user, "ops");
  EXPECT_EQ(o->password, "p?ss");
  EXPECT_EQ(o->host, "redis.example");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->db, 2);
  EXPECT_TRUE(o->tls.enabled);
  EXPECT_EQ(o->tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(o->tls.cert_file, "/etc/c&.pem");
  EXPECT_EQ(o->tls.key_file, "/etc/c.key");
  EXPECT_EQ(o->tls.server_name, "redis.internal");
  EXPECT_FALSE(o->tls.verify);

  // Defaults: verification on, system CAs, the host's name.
  o = ParseRedisUrl("rediss://localhost");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->tls.enabled);
  EXPECT_TRUE(o->tls.verify);
  EXPECT_EQ(o->tls.ca_file, "");
  EXPECT_EQ(o->tls.server_name, "");
  EXPECT_EQ(o->port, 6379);
  // A password may hold '?' and '@' unencoded: the query starts after the user-info.
  o = ParseRedisUrl("rediss://:a?b@c@h:7000?tls_verify=true");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->password, "a?b@c");
  EXPECT_EQ(o->host, "h");
  // redis:// stays plain.
  o = ParseRedisUrl("redis://h:7000");
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->tls.enabled);
}

TEST(RedisTlsUrlTest, BadParametersAreNamed) {
  auto error = [](const std::string& url) {
    Result<RedisOptions> o = ParseRedisUrl(url);
    EXPECT_FALSE(o.ok()) << url;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    return o.status().message();
  };
  EXPECT_THAT(error("rediss://h?tls_ca=/a&tls_cafile=/b"),
              HasSubstr("unknown query parameter \"tls_cafile\""));
  EXPECT_THAT(error("rediss://h?verify=false"), HasSubstr("unknown query parameter \"verify\""));
  EXPECT_THAT(error("redis://h?tls_ca=/a"), HasSubstr("tls_ca needs TLS: use rediss://"));
  EXPECT_THAT(error("rediss://h?tls_ca=/a&tls_ca=/b"), HasSubstr("tls_ca is given twice"));
  EXPECT_THAT(error("rediss://h?tls_ca="), HasSubstr("tls_ca is empty"));
  EXPECT_THAT(error("rediss://h?tls_ca"), HasSubstr("tls_ca has no value"));
  EXPECT_THAT(error("rediss://h?tls_verify=no"), HasSubstr("tls_verify must be true or false"));
  EXPECT_THAT(error("rediss://h?tls_cert=/c"), HasSubstr("tls_cert and tls_key go together"));
  EXPECT_THAT(error("rediss://h?tls_server_name=a/b"), HasSubstr("tls_server_name"));
  EXPECT_THAT(error("rediss://h?tls_ca=/a&"), HasSubstr("empty query parameter"));
  EXPECT_THAT(error("rediss://h?tls_ca=%zz"), HasSubstr("percent-encoding"));
  EXPECT_THAT(error("rediss://u:pw@h?tls_ca=/a@b"), HasSubstr("%40"));
  EXPECT_THAT(error("rediss://u:hunter2@h?tls_ca=/a@b"), Not(HasSubstr("hunter2")));
  EXPECT_THAT(error("rediss://u:hunter2@h?x=1"), Not(HasSubstr("hunter2")));
  EXPECT_THAT(error("http://h"), HasSubstr("redis:// or rediss://"));
}

}  // namespace
}  // namespace gnomon::testing
