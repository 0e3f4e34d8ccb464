#include "src/server/alerts.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gnomon/testing/fake_clock.h"
#include "src/net/test_servers.h"

namespace gnomon::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

struct Received {
  std::string body;
  std::string content_type;
  std::string event;
  std::string delivery;
  std::string timestamp;
  std::string signature;
  bool has_signature = false;
};

// Computed here independently of alerts.cc: hex HMAC-SHA256 of "<timestamp>.<body>".
std::string ExpectedSignature(const std::string& secret, const std::string& timestamp,
                              const std::string& body) {
  const std::string message = timestamp + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  std::string hex;
  char buf[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", mac[i]);
    hex += buf;
  }
  return "sha256=" + hex;
}

SchedulerEvent Event(SchedulerEvent::Kind kind, std::string job, std::string run,
                     RunOutcome outcome = RunOutcome::kRunning, std::string detail = "") {
  SchedulerEvent e{kind};
  e.job_id = std::move(job);
  e.run_id = std::move(run);
  e.outcome = outcome;
  e.detail = std::move(detail);
  e.attempt = 2;
  e.fencing_token = 42;
  e.scheduled_at = Instant::FromUnixSeconds(1767225600);
  e.at = Instant::FromUnixMillis(1767225605123);
  return e;
}

SchedulerEvent Failed(std::string job, std::string run = "r") {
  return Event(SchedulerEvent::Kind::kRunFinished, std::move(job), std::move(run),
               RunOutcome::kFailed, "exit status 1");
}

SchedulerEvent Misfire(std::string job, int64_t scheduled_s) {
  SchedulerEvent e = Event(SchedulerEvent::Kind::kSkipped, std::move(job),
                           "m@" + std::to_string(scheduled_s), RunOutcome::kSkipped, "misfire");
  e.scheduled_at = Instant::FromUnixSeconds(scheduled_s);
  return e;
}

// A real webhook receiver on a free loopback port. Answers the scripted statuses in order, then
// 200; while `hang` is set, each request waits until Release().
class AlertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::unique_lock lock(mu_);
      Received r;
      r.body = req.body;
      r.content_type = req.get_header_value("Content-Type");
      r.event = req.get_header_value("X-Gnomon-Event");
      r.delivery = req.get_header_value("X-Gnomon-Delivery");
      r.timestamp = req.get_header_value("X-Gnomon-Timestamp");
      r.has_signature = req.has_header("X-Gnomon-Signature");
      r.signature = req.get_header_value("X-Gnomon-Signature");
      received_.push_back(r);
      cv_.notify_all();
      if (hang_) {
        SystemClock::Get().WaitFor(lock, cv_, seconds(60), [&] { return released_; });
      }
      res.status = 200;
      if (!statuses_.empty()) {
        res.status = statuses_.front();
        statuses_.pop_front();
      }
    });
    server_.Get("/ping", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("pong", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    server_thread_ = std::jthread([this] { server_.listen_after_bind(); });
    httplib::Client probe("127.0.0.1", port_);
    const auto res = probe.Get("/ping");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
  }

  void TearDown() override {
    Release();
    server_.stop();
    if (server_thread_.joinable()) server_thread_.join();
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  AlertTarget Target(std::string name = "ops", std::string secret = "") const {
    return AlertTarget{std::move(name), Url(), std::move(secret), {}, {}};
  }
  // Tiny deterministic backoffs on the real clock.
  static AlertOptions FastOptions() {
    AlertOptions o;
    o.backoff_initial = milliseconds(1);
    o.backoff_max = milliseconds(4);
    o.request_timeout = seconds(30);
    o.missed_fire_window = Duration::zero();
    o.jitter = [] { return 1.0; };
    return o;
  }

  void Script(std::vector<int> statuses) {
    std::lock_guard lock(mu_);
    statuses_.assign(statuses.begin(), statuses.end());
  }
  void Hang() {
    std::lock_guard lock(mu_);
    hang_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool AwaitReceived(size_t n) {
    std::unique_lock lock(mu_);
    return SystemClock::Get().WaitFor(lock, cv_, seconds(20),
                                      [&] { return received_.size() >= n; });
  }
  std::vector<Received> received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  std::vector<std::string> Runs() {
    std::vector<std::string> runs;
    for (const Received& r : received()) runs.push_back(nlohmann::json::parse(r.body)["run"]);
    return runs;
  }

  httplib::Server server_;
  std::jthread server_thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> received_;
  std::deque<int> statuses_;
  bool hang_ = false;
  bool released_ = false;
};

TEST(AlertValidateTest, NamesTargetAndField) {
  EXPECT_TRUE(ValidateAlertTargets({}).ok());
  AlertTarget good{"ops", "http://example.com/hook", "s", {"run_failed"}, {"report"}};
  EXPECT_TRUE(ValidateAlertTargets({good}).ok());

  AlertTarget t = good;
  t.name = "";
  EXPECT_THAT(ValidateAlertTargets({t}).message(), HasSubstr("alert #1: name is empty"));
  EXPECT_THAT(ValidateAlertTargets({good, good}).message(),
              HasSubstr("alert \"ops\": name is used by another"));
  t = good;
  t.url = "ftp://example.com";
  const Status s = ValidateAlertTargets({t});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("alert \"ops\": url \"ftp://example.com\": unsupported"));
  t.url = "example.com/hook";
  EXPECT_THAT(ValidateAlertTargets({t}).message(), HasSubstr("missing scheme"));
  t.url = "http:///hook";
  EXPECT_THAT(ValidateAlertTargets({t}).message(), HasSubstr("invalid host"));
  t.url = "";
  EXPECT_THAT(ValidateAlertTargets({t}).message(), HasSubstr("alert \"ops\": url is empty"));
  t.url = "https://hooks.example.com:8443/x";
  EXPECT_TRUE(ValidateAlertTargets({t}).ok());
  t.url = "https://user:pw@hooks.example.com/x";
  EXPECT_THAT(ValidateAlertTargets({t}).message(),
              AllOf(HasSubstr("alert \"ops\": url \"https://hooks.example.com/x\": user info"),
                    Not(HasSubstr("pw"))));
  t = good;
  t.events = {"run_failed", "exploded"};
  EXPECT_THAT(ValidateAlertTargets({t}).message(),
              HasSubstr("alert \"ops\": events: unknown event \"exploded\""));
  t.events = {"lost_run", "lost_run"};
  EXPECT_THAT(ValidateAlertTargets({t}).message(), HasSubstr("listed twice"));
  t = good;
  t.jobs = {""};
  EXPECT_THAT(ValidateAlertTargets({t}).message(),
              HasSubstr("alert \"ops\": jobs: empty job prefix"));
}

TEST_F(AlertTest, PostsSignedJson) {
  testing::FakeClock clock(Instant::FromUnixSeconds(1767225700));
  AlertOptions options = FastOptions();
  options.clock = &clock;
  AlertObserver alerts({Target("ops", "s3cret"), Target("plain")}, "node-a", options);
  alerts.OnEvent(Failed("report", "report@1767225600000"));
  alerts.Stop();

  const std::vector<Received> got = received();
  ASSERT_EQ(got.size(), 2u);
  for (const Received& r : got) {
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_EQ(r.event, "run_failed");
    EXPECT_EQ(r.timestamp, "1767225700");
    const nlohmann::json body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["event"], "run_failed");
    EXPECT_EQ(body["job"], "report");
    EXPECT_EQ(body["run"], "report@1767225600000");
    EXPECT_EQ(body["attempt"], 2);
    EXPECT_EQ(body["fencing_token"], 42);
    EXPECT_EQ(body["scheduled_at"], "2026-01-01T00:00:00.000Z");
    EXPECT_EQ(body["at"], "2026-01-01T00:00:05.123Z");
    EXPECT_EQ(body["node"], "node-a");
    EXPECT_EQ(body["outcome"], "failed");
    EXPECT_EQ(body["detail"], "exit status 1");
    EXPECT_EQ(body["count"], 1);
  }
  EXPECT_NE(got[0].delivery, got[1].delivery);  // one delivery per target
  // Targets are served in order; the first is signed, the second is not.
  ASSERT_TRUE(got[0].has_signature);
  EXPECT_EQ(got[0].signature, ExpectedSignature("s3cret", got[0].timestamp, got[0].body));
  EXPECT_NE(got[0].signature, ExpectedSignature("wrong", got[0].timestamp, got[0].body));
  EXPECT_FALSE(got[1].has_signature);
  const AlertStats stats = alerts.Stats();
  EXPECT_EQ(stats.delivered, 2u);
  EXPECT_EQ(stats.failed, 0u);
  EXPECT_EQ(stats.dropped, 0u);
}

// SIGHUP replaces the targets: later events go to the new set; an invalid set changes nothing.
TEST_F(AlertTest, TargetsCanBeReplaced) {
  AlertObserver alerts({}, "n", FastOptions());
  alerts.OnEvent(Failed("a", "before"));
  AlertTarget bad = Target();
  bad.url = "ftp://x";
  EXPECT_FALSE(alerts.SetTargets({bad}).ok());
  ASSERT_TRUE(alerts.SetTargets({Target("ops")}).ok());
  alerts.OnEvent(Failed("a", "after"));
  ASSERT_TRUE(AwaitReceived(1));
  ASSERT_TRUE(alerts.SetTargets({}).ok());
  alerts.OnEvent(Failed("a", "removed"));
  alerts.Stop();
  EXPECT_EQ(Runs(), std::vector<std::string>{"after"});
}

TEST_F(AlertTest, MapsEvents) {
  AlertObserver alerts({Target()}, "n", FastOptions());
  using K = SchedulerEvent::Kind;
  alerts.OnEvent(Failed("a", "1"));
  alerts.OnEvent(Event(K::kRunFinished, "a", "2", RunOutcome::kTimedOut));
  alerts.OnEvent(Event(K::kRunFinished, "a", "x", RunOutcome::kSucceeded));
  alerts.OnEvent(Event(K::kRunFinished, "a", "x", RunOutcome::kCancelled));
  alerts.OnEvent(Event(K::kLostRun, "a", "3", RunOutcome::kRunning, "fail (holder n2)"));
  alerts.OnEvent(Event(K::kAutoPaused, "a", "4"));
  alerts.OnEvent(Misfire("a", 100));
  alerts.OnEvent(Event(K::kSkipped, "a", "x", RunOutcome::kSkipped, "overlap"));
  alerts.OnEvent(Event(K::kClaimed, "a", "x"));
  alerts.OnEvent(Event(K::kError, "a", "x", RunOutcome::kRunning, "boom"));
  alerts.Stop();
  std::vector<std::string> events;
  for (const Received& r : received()) events.push_back(r.event);
  EXPECT_THAT(events,
              ElementsAre("run_failed", "run_failed", "lost_run", "auto_paused", "missed_fire"));
  EXPECT_EQ(nlohmann::json::parse(received()[1].body)["outcome"], "timed_out");
}

TEST_F(AlertTest, RetriesServerErrorsWithTheSameDeliveryId) {
  Script({500, 500});
  AlertObserver alerts({Target("ops", "k")}, "n", FastOptions());
  alerts.OnEvent(Failed("report"));
  ASSERT_TRUE(AwaitReceived(3));
  alerts.Stop();
  const std::vector<Received> got = received();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].delivery, got[1].delivery);
  EXPECT_EQ(got[1].delivery, got[2].delivery);
  for (const Received& r : got) {
    EXPECT_EQ(r.body, got[0].body);
    EXPECT_EQ(r.signature, ExpectedSignature("k", r.timestamp, r.body));
  }
  const AlertStats stats = alerts.Stats();
  EXPECT_EQ(stats.delivered, 1u);
  EXPECT_EQ(stats.retries, 2u);
  EXPECT_EQ(stats.attempts, 3u);
  EXPECT_EQ(stats.failed, 0u);
}

TEST_F(AlertTest, RetriesTooManyRequestsAndGivesUpAfterMaxAttempts) {
  Script({429, 503, 502, 200});
  AlertOptions options = FastOptions();
  options.max_attempts = 3;
  AlertObserver alerts({Target()}, "n", options);
  alerts.OnEvent(Failed("report"));
  ASSERT_TRUE(AwaitReceived(3));
  alerts.Stop();  // drains: a fourth attempt would be made here if it were allowed
  EXPECT_EQ(received().size(), 3u);
  const AlertStats stats = alerts.Stats();
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(stats.delivered, 0u);
  EXPECT_EQ(stats.attempts, 3u);
}

TEST_F(AlertTest, ClientErrorIsNotRetried) {
  Script({400});
  AlertObserver alerts({Target()}, "n", FastOptions());
  alerts.OnEvent(Failed("report"));
  ASSERT_TRUE(AwaitReceived(1));
  alerts.Stop();  // drains: a retry would be made here if one were queued
  EXPECT_EQ(received().size(), 1u);
  const AlertStats stats = alerts.Stats();
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(stats.retries, 0u);
  EXPECT_EQ(stats.attempts, 1u);
}

TEST_F(AlertTest, ConnectionErrorsAreRetried) {
  // A port that was free a moment ago: connections are refused.
  int closed_port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    closed_port = ntohs(addr.sin_port);
    ::close(fd);
  }
  ASSERT_GT(closed_port, 0);
  AlertOptions options = FastOptions();
  options.max_attempts = 2;
  AlertTarget target{"down", "http://127.0.0.1:" + std::to_string(closed_port) + "/", "", {}, {}};
  AlertObserver alerts({target}, "n", options);
  alerts.OnEvent(Failed("report"));
  alerts.Stop();
  const AlertStats stats = alerts.Stats();
  EXPECT_EQ(stats.attempts, 2u);
  EXPECT_EQ(stats.retries, 1u);
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_THAT(stats.last_error, HasSubstr("POST " + target.url + ": connect: "));
}

TEST_F(AlertTest, LinkLocalTargetsAreRefusedByTheEgressRule) {
  AlertOptions options = FastOptions();
  options.max_attempts = 1;
  std::vector<std::string> given_up;  // written on the delivery thread, read after Stop()
  options.on_given_up = [&](const std::string& target, const std::string& event,
                            const std::string& job, const std::string& error) {
    given_up.push_back(target + " " + event + " " + job + " " + error);
  };
  AlertObserver alerts({AlertTarget{"meta", "http://169.254.169.254/hook", "", {}, {}}}, "n",
                       options);
  alerts.OnEvent(Failed("report"));
  alerts.Stop();
  const AlertStats stats = alerts.Stats();
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(stats.delivered, 0u);
  EXPECT_EQ(stats.last_error,
            "POST http://169.254.169.254/hook: egress: 169.254.169.254 is denied by egress_deny "
            "169.254.0.0/16");
  // The daemon logs each alert given up (alert_failed).
  EXPECT_THAT(given_up, ElementsAre("meta run_failed report " + stats.last_error));
}

TEST_F(AlertTest, DeliversOverHttpsWithTheConfiguredCa) {
  net::testing::TestPki pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  net::testing::TestServer tls(pki.Path("server.pem"), pki.Path("server.key"));
  std::atomic<int> hooks{0};
  std::string signature;  // written by the server thread before it answers
  tls.server().Post("/hook", [&](const httplib::Request& req, httplib::Response& res) {
    signature = req.get_header_value("X-Gnomon-Signature");
    ++hooks;
    res.status = 204;
  });
  ASSERT_TRUE(tls.Start());
  AlertTarget target{
      "tls", "https://localhost:" + std::to_string(tls.port()) + "/hook", "k", {}, {}};
  AlertOptions options = FastOptions();
  options.max_attempts = 1;
  {
    // Verified against the system CAs, which do not know the test CA: refused, naming the peer.
    AlertObserver alerts({target}, "n", options);
    alerts.OnEvent(Failed("report"));
    alerts.Stop();
    EXPECT_EQ(alerts.Stats().failed, 1u);
    EXPECT_THAT(alerts.Stats().last_error,
                HasSubstr("TLS: the certificate of localhost:" + std::to_string(tls.port()) +
                          " was not verified"));
  }
  EXPECT_EQ(hooks.load(), 0);
  options.tls.ca_file = pki.Path("ca.pem");
  AlertObserver alerts({target}, "n", options);
  alerts.OnEvent(Failed("report"));
  alerts.Stop();
  EXPECT_EQ(alerts.Stats().delivered, 1u) << alerts.Stats().last_error;
  EXPECT_EQ(hooks.load(), 1);
  EXPECT_TRUE(signature.starts_with("sha256=")) << signature;
}

TEST_F(AlertTest, BackoffWaitsOnTheClock) {
  testing::FakeClock clock;
  Script({500});
  AlertOptions options = FastOptions();
  options.clock = &clock;
  options.backoff_initial = seconds(1);
  options.backoff_max = seconds(60);
  AlertObserver alerts({Target()}, "n", options);
  alerts.OnEvent(Failed("report"));
  ASSERT_TRUE(AwaitReceived(1));
  // Back on the clock only after handling the 500: the retry is queued with its backoff.
  ASSERT_TRUE(clock.AwaitWaiters(1));
  EXPECT_EQ(alerts.Stats().retries, 1u);
  EXPECT_EQ(alerts.Stats().queued, 1u);
  clock.Advance(milliseconds(999));  // jitter 1.0: the backoff is exactly 1 s
  EXPECT_EQ(received().size(), 1u);
  clock.Advance(milliseconds(1));
  ASSERT_TRUE(AwaitReceived(2));
  alerts.Stop();
  EXPECT_EQ(alerts.Stats().delivered, 1u);
}

TEST_F(AlertTest, BackoffDoublesWithFullJitterUpToTheCap) {
  // Observed through the fake clock: each retry becomes due after exactly the capped backoff
  // (jitter 1.0); with jitter 0 retries are immediate.
  testing::FakeClock clock;
  Script({500, 500, 500, 500});
  AlertOptions options = FastOptions();
  options.clock = &clock;
  options.backoff_initial = seconds(1);
  options.backoff_max = seconds(3);
  AlertObserver alerts({Target()}, "n", options);
  alerts.OnEvent(Failed("report"));
  const Duration expected[] = {seconds(1), seconds(2), seconds(3), seconds(3)};
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(AwaitReceived(i + 1));
    ASSERT_TRUE(clock.AwaitWaiters(1));
    clock.Advance(expected[i] - milliseconds(1));
    EXPECT_EQ(received().size(), i + 1) << "retry " << i + 1 << " came early";
    clock.Advance(milliseconds(1));
  }
  ASSERT_TRUE(AwaitReceived(5));
  alerts.Stop();
  EXPECT_EQ(alerts.Stats().delivered, 1u);
  EXPECT_EQ(alerts.Stats().retries, 4u);
}

TEST_F(AlertTest, FiltersByEventAndJobPrefix) {
  AlertTarget global = Target("global");
  AlertTarget billing = Target("billing");
  billing.jobs = {"billing-", "invoice"};
  AlertTarget paused_only = Target("paused");
  paused_only.events = {"auto_paused"};
  AlertObserver alerts({global, billing, paused_only}, "n", FastOptions());
  alerts.OnEvent(Failed("billing-daily", "1"));
  alerts.OnEvent(Failed("report", "2"));
  alerts.OnEvent(Failed("invoices", "3"));
  alerts.OnEvent(Event(SchedulerEvent::Kind::kAutoPaused, "report", "4"));
  alerts.Stop();
  std::multiset<std::string> got;
  for (const Received& r : received()) {
    // Which target got it: each alert's delivery id is unique; identify by run and event.
    got.insert(r.event + ":" + std::string(nlohmann::json::parse(r.body)["run"]));
  }
  // global: 1 2 3 4; billing: 1 3; paused: 4.
  EXPECT_EQ(got, (std::multiset<std::string>{"run_failed:1", "run_failed:1", "run_failed:2",
                                             "run_failed:3", "run_failed:3", "auto_paused:4",
                                             "auto_paused:4"}));
}

TEST_F(AlertTest, OnEventDoesNotBlockWhileTheReceiverHangs) {
  Hang();
  AlertObserver alerts({Target()}, "n", FastOptions());
  alerts.OnEvent(Failed("job", "first"));
  ASSERT_TRUE(AwaitReceived(1));  // the delivery thread is stuck in the hanging request
  for (int i = 0; i < 200; ++i) alerts.OnEvent(Failed("job", std::to_string(i)));
  // Every call returned while the request hangs: all 200 are queued behind it.
  EXPECT_EQ(alerts.Stats().queued, 200u);
  EXPECT_EQ(received().size(), 1u);
  Release();
  alerts.Stop();
  EXPECT_EQ(alerts.Stats().delivered, 201u);
  EXPECT_EQ(alerts.Stats().queued, 0u);
}

TEST_F(AlertTest, QueueOverflowDropsTheOldest) {
  Hang();
  AlertOptions options = FastOptions();
  options.queue_capacity = 3;
  AlertObserver alerts({Target()}, "n", options);
  alerts.OnEvent(Failed("job", "0"));
  ASSERT_TRUE(AwaitReceived(1));
  for (int i = 1; i <= 5; ++i) alerts.OnEvent(Failed("job", std::to_string(i)));
  AlertStats stats = alerts.Stats();
  EXPECT_EQ(stats.queued, 3u);
  EXPECT_EQ(stats.dropped, 2u);
  Release();
  alerts.Stop();
  EXPECT_THAT(Runs(), ElementsAre("0", "3", "4", "5"));
  stats = alerts.Stats();
  EXPECT_EQ(stats.delivered, 4u);
  EXPECT_EQ(stats.dropped, 2u);
}

TEST_F(AlertTest, MissedFiresOfAJobAreCoalesced) {
  testing::FakeClock clock;
  AlertOptions options = FastOptions();
  options.clock = &clock;
  options.missed_fire_window = seconds(10);
  AlertObserver alerts({Target()}, "n", options);
  alerts.OnEvent(Misfire("a", 100));
  alerts.OnEvent(Misfire("a", 160));
  alerts.OnEvent(Misfire("b", 100));
  alerts.OnEvent(Misfire("a", 220));
  EXPECT_EQ(alerts.Stats().queued, 2u);  // held for the window, merged per job
  EXPECT_EQ(received().size(), 0u);
  clock.Advance(seconds(10));
  ASSERT_TRUE(AwaitReceived(2));
  const std::vector<Received> got = received();
  const nlohmann::json a = nlohmann::json::parse(got[0].body);
  EXPECT_EQ(a["event"], "missed_fire");
  EXPECT_EQ(a["job"], "a");
  EXPECT_EQ(a["count"], 3);
  EXPECT_EQ(a["scheduled_at"], "1970-01-01T00:01:40.000Z");
  EXPECT_EQ(a["last_scheduled_at"], "1970-01-01T00:03:40.000Z");
  EXPECT_EQ(nlohmann::json::parse(got[1].body)["count"], 1);

  // After the window a new missed fire starts a new alert; Stop() sends held alerts at once.
  alerts.OnEvent(Misfire("a", 280));
  alerts.Stop();
  ASSERT_EQ(received().size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(received()[2].body)["count"], 1);
  EXPECT_EQ(alerts.Stats().delivered, 3u);
}

TEST_F(AlertTest, StopDropsWhatItCannotDeliverWithinTheBound) {
  Script({500});
  AlertOptions options = FastOptions();
  options.backoff_initial = seconds(60);  // jitter 1.0: the retry is due in exactly 60 s
  options.backoff_max = seconds(60);
  options.drain_timeout = milliseconds(50);
  AlertObserver alerts({Target()}, "n", options);
  alerts.OnEvent(Failed("job"));
  ASSERT_TRUE(AwaitReceived(1));
  alerts.Stop();  // the retry is due long after the drain bound: dropped
  const AlertStats stats = alerts.Stats();
  EXPECT_EQ(stats.retries, 1u);
  EXPECT_EQ(stats.dropped, 1u);
  EXPECT_EQ(stats.queued, 0u);
  EXPECT_EQ(received().size(), 1u);
  alerts.OnEvent(Failed("job"));  // ignored after Stop
  EXPECT_EQ(alerts.Stats().queued, 0u);
  alerts.Stop();  // idempotent
}

}  // namespace
}  // namespace gnomon::server
