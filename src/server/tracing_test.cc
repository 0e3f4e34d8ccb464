// OtlpExporter against a real httplib::Server on a free loopback port that collects OTLP bodies.
#include "src/server/tracing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "src/net/test_servers.h"

namespace gnomon::server {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr auto kWait = std::chrono::seconds(30);  // a bound for conditions, never a sleep

// A collector: records the body of every POST /v1/traces. While `hang` is set, requests wait in
// the handler until Release(); `status` is the answer.
class Receiver {
 public:
  Receiver() {
    server_.Post("/v1/traces", [this](const httplib::Request& req, httplib::Response& res) {
      std::unique_lock lock(mu_);
      ++entered_;
      cv_.notify_all();
      SystemClock::Get().WaitFor(lock, cv_, std::chrono::seconds(60), [&] { return !hang_; });
      bodies_.push_back(req.body);
      content_types_.push_back(req.get_header_value("Content-Type"));
      cv_.notify_all();
      res.status = status_;
      res.set_content("{}", "application/json");
    });
    server_.Get("/ping", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("pong", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::jthread([this] { server_.listen_after_bind(); });
    httplib::Client probe("127.0.0.1", port_);  // the accept loop runs (stop() reaches it)
    const auto res = probe.Get("/ping");
    ready_ = res && res->status == 200;
  }
  ~Receiver() {
    Release();
    server_.stop();
  }

  bool ready() const { return ready_ && port_ > 0; }
  std::string endpoint() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1/traces";
  }
  void Hang() {
    std::lock_guard lock(mu_);
    hang_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    hang_ = false;
    cv_.notify_all();
  }
  void SetStatus(int status) {
    std::lock_guard lock(mu_);
    status_ = status;
  }
  bool AwaitEntered(int n) {
    std::unique_lock lock(mu_);
    return SystemClock::Get().WaitFor(lock, cv_, kWait, [&] { return entered_ >= n; });
  }
  bool AwaitBodies(size_t n) {
    std::unique_lock lock(mu_);
    return SystemClock::Get().WaitFor(lock, cv_, kWait, [&] { return bodies_.size() >= n; });
  }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::vector<std::string> content_types() {
    std::lock_guard lock(mu_);
    return content_types_;
  }
  // Every span of every body received.
  std::vector<json> Spans() {
    std::vector<json> spans;
    for (const std::string& body : bodies()) {
      const json j = json::parse(body);
      for (const json& rs : j.at("resourceSpans")) {
        for (const json& ss : rs.at("scopeSpans")) {
          for (const json& s : ss.at("spans")) spans.push_back(s);
        }
      }
    }
    return spans;
  }

 private:
  httplib::Server server_;
  std::jthread thread_;
  int port_ = 0;
  bool ready_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool hang_ = false;
  int status_ = 200;
  int entered_ = 0;
  std::vector<std::string> bodies_;
  std::vector<std::string> content_types_;
};

TracingOptions Options(const Receiver& r) {
  TracingOptions o;
  o.endpoint = r.endpoint();
  o.node_id = "node-a";
  o.flush_interval = std::chrono::hours(1);  // tests flush by max_batch or Stop()
  o.timeout = std::chrono::seconds(60);
  return o;
}

SchedulerEvent Event(SchedulerEvent::Kind kind, const std::string& run_id, int attempt,
                     int64_t at_ms) {
  SchedulerEvent e{};
  e.kind = kind;
  e.job_id = "report";
  e.run_id = run_id;
  e.attempt = attempt;
  e.fencing_token = 42;
  e.scheduled_at = Instant::FromUnixMillis(1'000'000);
  e.at = Instant::FromUnixMillis(at_ms);
  return e;
}

// claimed (30 ms late) -> started -> finished (run 500 ms, report 20 ms).
void FeedAttempt(OtlpExporter& x, const std::string& run_id, RunOutcome outcome,
                 std::string_view traceparent = kTraceparent) {
  SchedulerEvent claimed = Event(SchedulerEvent::Kind::kClaimed, run_id, 1, 1'000'030);
  claimed.duration = std::chrono::milliseconds(30);
  x.Record(claimed, "");
  x.Record(Event(SchedulerEvent::Kind::kRunStarted, run_id, 1, 1'000'040), traceparent);
  SchedulerEvent finished = Event(SchedulerEvent::Kind::kRunFinished, run_id, 1, 1'000'560);
  finished.outcome = outcome;
  finished.duration = std::chrono::milliseconds(500);
  finished.detail = outcome == RunOutcome::kFailed ? "exit status 3" : "";
  x.Record(finished, traceparent);
}

const json* Find(const std::vector<json>& spans, const std::string& name) {
  for (const json& s : spans) {
    if (s.at("name") == name) return &s;
  }
  return nullptr;
}

std::string Attr(const json& span, const std::string& key) {
  for (const json& a : span.at("attributes")) {
    if (a.at("key") != key) continue;
    const json& v = a.at("value");
    return v.contains("stringValue") ? v.at("stringValue").get<std::string>()
                                     : v.at("intValue").get<std::string>();
  }
  return "<missing>";
}

TEST(TracingOptionsTest, Validates) {
  TracingOptions o;
  o.endpoint = "http://localhost:4318/v1/traces";
  EXPECT_TRUE(ValidateTracingOptions(o).ok());
  TracingOptions bad = o;
  bad.endpoint = "";
  EXPECT_THAT(ValidateTracingOptions(bad).message(), HasSubstr("tracing.endpoint"));
  bad.endpoint = "localhost:4318";
  EXPECT_THAT(ValidateTracingOptions(bad).message(), HasSubstr("missing scheme"));
  bad.endpoint = "ftp://x/v1/traces";
  EXPECT_THAT(ValidateTracingOptions(bad).message(), HasSubstr("unsupported scheme"));
  bad = o;
  bad.max_batch = 0;
  EXPECT_THAT(ValidateTracingOptions(bad).message(), HasSubstr("tracing.max_batch"));
  bad = o;
  bad.queue_capacity = 0;
  EXPECT_THAT(ValidateTracingOptions(bad).message(), HasSubstr("tracing.queue_capacity"));
  bad = o;
  bad.flush_interval = Duration::zero();
  EXPECT_THAT(ValidateTracingOptions(bad).message(), HasSubstr("tracing.flush_interval"));
  bad = o;
  bad.timeout = Duration(-1);
  EXPECT_THAT(ValidateTracingOptions(bad).message(), HasSubstr("tracing.timeout"));
  bad = o;
  bad.service_name = "";
  EXPECT_THAT(ValidateTracingOptions(bad).message(), HasSubstr("tracing.service_name"));
  // https:// is accepted; user info is not, and is never quoted; TLS files must be readable.
  TracingOptions tls = o;
  tls.endpoint = "https://collector.example.com:4318/v1/traces";
  EXPECT_TRUE(ValidateTracingOptions(tls).ok());
  bad = tls;
  bad.endpoint = "https://u:secret@collector.example.com/v1/traces";
  EXPECT_THAT(ValidateTracingOptions(bad).message(),
              AllOf(HasSubstr("tracing.endpoint: url \"https://collector.example.com/v1/traces\""),
                    HasSubstr("user info"), Not(HasSubstr("secret"))));
  bad = tls;
  bad.tls.ca_file = "/nonexistent/ca.pem";
  EXPECT_THAT(ValidateTracingOptions(bad).message(),
              HasSubstr("tracing.tls.ca_file: \"/nonexistent/ca.pem\""));
}

TEST(TracingTest, ParsesTraceparent) {
  const std::optional<TraceContext> tc = ParseTraceparent(kTraceparent);
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(tc->span_id, "00f067aa0ba902b7");
  EXPECT_FALSE(ParseTraceparent(""));
  EXPECT_FALSE(ParseTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));
  EXPECT_FALSE(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"));
  EXPECT_FALSE(ParseTraceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"));
  EXPECT_FALSE(ParseTraceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
  EXPECT_FALSE(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"));
  EXPECT_TRUE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"));
}

TEST(OtlpExporterTest, ExportsSpansOfAFailedAttempt) {
  Receiver r;
  ASSERT_TRUE(r.ready());
  OtlpExporter x(Options(r), SystemClock::Get());
  FeedAttempt(x, "report@1000", RunOutcome::kFailed);
  x.Stop();  // flushes

  ASSERT_EQ(r.bodies().size(), 1u);
  EXPECT_EQ(r.content_types()[0], "application/json");
  const json body = json::parse(r.bodies()[0]);
  const json& resource_attrs = body["resourceSpans"][0]["resource"]["attributes"];
  EXPECT_EQ(resource_attrs[0]["key"], "service.name");
  EXPECT_EQ(resource_attrs[0]["value"]["stringValue"], "gnomon");
  EXPECT_EQ(resource_attrs[1]["key"], "service.instance.id");
  EXPECT_EQ(resource_attrs[1]["value"]["stringValue"], "node-a");
  EXPECT_EQ(body["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"], "gnomon");

  const std::vector<json> spans = r.Spans();
  ASSERT_EQ(spans.size(), 4u);
  const json* fire = Find(spans, "fire report");
  const json* claim = Find(spans, "claim");
  const json* run = Find(spans, "run");
  const json* complete = Find(spans, "complete");
  ASSERT_TRUE(fire && claim && run && complete);
  for (const json* s : {fire, claim, run, complete}) {
    EXPECT_EQ((*s)["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ((*s)["kind"], 1);
    EXPECT_EQ((*s)["spanId"].get<std::string>().size(), 16u);
    EXPECT_EQ(Attr(*s, "gnomon.job"), "report");
    EXPECT_EQ(Attr(*s, "gnomon.run_id"), "report@1000");
    EXPECT_EQ(Attr(*s, "gnomon.node"), "node-a");
    EXPECT_EQ(Attr(*s, "gnomon.fencing_token"), "42");
    EXPECT_EQ(Attr(*s, "gnomon.attempt"), "1");
  }
  // The job's spans (parent-id 00f067aa0ba902b7) nest under "run"; "run" under the attempt.
  EXPECT_FALSE(fire->contains("parentSpanId"));
  EXPECT_EQ((*run)["spanId"], "00f067aa0ba902b7");
  EXPECT_EQ((*claim)["parentSpanId"], (*fire)["spanId"]);
  EXPECT_EQ((*run)["parentSpanId"], (*fire)["spanId"]);
  EXPECT_EQ((*complete)["parentSpanId"], (*fire)["spanId"]);
  EXPECT_NE((*claim)["spanId"], (*complete)["spanId"]);

  EXPECT_EQ((*fire)["startTimeUnixNano"], "1000000000000");  // the scheduled instant
  EXPECT_EQ((*fire)["endTimeUnixNano"], "1000560000000");
  EXPECT_EQ((*claim)["endTimeUnixNano"], "1000030000000");
  EXPECT_EQ((*run)["startTimeUnixNano"], "1000040000000");
  EXPECT_EQ((*run)["endTimeUnixNano"], "1000540000000");
  EXPECT_EQ((*complete)["startTimeUnixNano"], "1000540000000");
  EXPECT_EQ((*complete)["endTimeUnixNano"], "1000560000000");

  EXPECT_EQ(Attr(*fire, "gnomon.outcome"), "failed");
  EXPECT_EQ(Attr(*run, "gnomon.outcome"), "failed");
  EXPECT_EQ((*fire)["status"]["code"], 2);
  EXPECT_EQ((*fire)["status"]["message"], "exit status 3");
  EXPECT_EQ((*run)["status"]["code"], 2);
  EXPECT_EQ((*claim)["status"]["code"], 0);

  const OtlpExporter::Stats st = x.stats();
  EXPECT_EQ(st.spans_exported, 4u);
  EXPECT_EQ(st.spans_dropped, 0u);
  EXPECT_EQ(st.batches_failed, 0u);
}

TEST(OtlpExporterTest, SucceededAttemptWithoutTraceparentGetsIdsFromTheRunId) {
  Receiver r;
  ASSERT_TRUE(r.ready());
  OtlpExporter x(Options(r), SystemClock::Get());
  // OnEvent: the events carry no traceparent (yet); retry of the fire, attempt 2.
  SchedulerEvent retry = Event(SchedulerEvent::Kind::kRetryScheduled, "report@1000", 2, 1'000'600);
  x.OnEvent(retry);
  x.OnEvent(Event(SchedulerEvent::Kind::kRunStarted, "report@1000", 2, 1'000'900));
  SchedulerEvent finished = Event(SchedulerEvent::Kind::kRunFinished, "report@1000", 2, 1'001'000);
  finished.outcome = RunOutcome::kSucceeded;
  finished.duration = std::chrono::milliseconds(90);
  x.OnEvent(finished);
  x.Stop();

  const std::vector<json> spans = r.Spans();
  ASSERT_EQ(spans.size(), 4u);
  const json* fire = Find(spans, "fire report");
  const json* claim = Find(spans, "claim");
  const json* run = Find(spans, "run");
  ASSERT_TRUE(fire && claim && run);
  const std::string trace_id = (*fire)["traceId"];
  EXPECT_EQ(trace_id.size(), 32u);
  EXPECT_NE(trace_id, std::string(32, '0'));
  for (const json& s : spans) EXPECT_EQ(s["traceId"], trace_id);
  EXPECT_EQ((*run)["parentSpanId"], (*fire)["spanId"]);
  EXPECT_EQ((*claim)["startTimeUnixNano"], "1000600000000");  // backoff + next attempt
  EXPECT_EQ((*claim)["endTimeUnixNano"], "1000900000000");
  EXPECT_EQ(Attr(*fire, "gnomon.attempt"), "2");
  EXPECT_EQ(Attr(*fire, "gnomon.outcome"), "succeeded");
  EXPECT_EQ((*fire)["status"]["code"], 0);
  EXPECT_EQ((*run)["status"]["code"], 0);
}

TEST(OtlpExporterTest, LostRunIsAnErrorSpan) {
  Receiver r;
  ASSERT_TRUE(r.ready());
  OtlpExporter x(Options(r), SystemClock::Get());
  SchedulerEvent lost = Event(SchedulerEvent::Kind::kLostRun, "report@1000", 1, 1'005'000);
  lost.detail = "fail (holder node-b)";
  x.OnEvent(lost);
  x.Stop();
  const std::vector<json> spans = r.Spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0]["name"], "lost report");
  EXPECT_EQ(Attr(spans[0], "gnomon.outcome"), "lost");
  EXPECT_EQ(spans[0]["status"]["code"], 2);
}

TEST(OtlpExporterTest, SendsAFullBatchWithoutWaitingForTheInterval) {
  Receiver r;
  ASSERT_TRUE(r.ready());
  TracingOptions o = Options(r);
  o.max_batch = 4;  // one attempt
  OtlpExporter x(o, SystemClock::Get());
  FeedAttempt(x, "report@1000", RunOutcome::kSucceeded);
  ASSERT_TRUE(r.AwaitBodies(1));  // flush_interval is an hour
  EXPECT_EQ(r.Spans().size(), 4u);
}

TEST(OtlpExporterTest, HangingCollectorNeverBlocksOnEventAndDropsBeyondCapacity) {
  Receiver r;
  ASSERT_TRUE(r.ready());
  r.Hang();
  TracingOptions o = Options(r);
  o.max_batch = 4;       // each attempt fills a batch
  o.queue_capacity = 8;  // two attempts wait
  OtlpExporter x(o, SystemClock::Get());
  FeedAttempt(x, "report@1", RunOutcome::kSucceeded);
  ASSERT_TRUE(r.AwaitEntered(1));  // the sender holds attempt 1 and waits on the collector
  // Every OnEvent below returns although the sender is stuck: the test would hang otherwise.
  for (int i = 2; i <= 6; ++i) FeedAttempt(x, "report@" + std::to_string(i), RunOutcome::kFailed);
  OtlpExporter::Stats st = x.stats();
  EXPECT_EQ(st.spans_dropped, 3u * 4u);  // attempts 4, 5, 6: the queue holds 2 and 3
  EXPECT_EQ(st.spans_exported, 0u);

  r.Release();
  x.Stop();  // flushes attempts 2 and 3
  st = x.stats();
  EXPECT_EQ(st.spans_exported, 3u * 4u);
  EXPECT_EQ(st.spans_dropped, 3u * 4u);
  EXPECT_EQ(st.batches_failed, 0u);
  std::set<std::string> run_ids;
  for (const json& s : r.Spans()) run_ids.insert(Attr(s, "gnomon.run_id"));
  EXPECT_EQ(run_ids, (std::set<std::string>{"report@1", "report@2", "report@3"}));
}

TEST(OtlpExporterTest, FailedBatchesAreDroppedAndCounted) {
  Receiver r;
  ASSERT_TRUE(r.ready());
  r.SetStatus(503);
  OtlpExporter x(Options(r), SystemClock::Get());
  FeedAttempt(x, "report@1", RunOutcome::kSucceeded);
  x.Stop();
  const OtlpExporter::Stats st = x.stats();
  EXPECT_EQ(st.batches_failed, 1u);
  EXPECT_EQ(st.spans_dropped, 4u);
  EXPECT_EQ(st.spans_exported, 0u);
  EXPECT_EQ(st.last_error, "POST " + r.endpoint() + ": HTTP status 503");
}

TEST(OtlpExporterTest, ExportsOverHttpsWithTheConfiguredCa) {
  net::testing::TestPki pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  net::testing::TestServer collector(pki.Path("server.pem"), pki.Path("server.key"),
                                     pki.Path("ca.pem"));  // mutual TLS
  std::atomic<int> posts{0};
  std::string client;  // written by the server thread before it answers
  collector.server().Post("/v1/traces", [&](const httplib::Request& req, httplib::Response& res) {
    client = net::testing::PeerCommonName(req);
    ++posts;
    res.set_content("{}", "application/json");
  });
  ASSERT_TRUE(collector.Start());
  TracingOptions o;
  o.endpoint = "https://localhost:" + std::to_string(collector.port()) + "/v1/traces";
  o.flush_interval = std::chrono::hours(1);
  o.timeout = std::chrono::seconds(10);
  o.tls.ca_file = pki.Path("other-ca.pem");  // the wrong CA first
  {
    OtlpExporter x(o, SystemClock::Get());
    FeedAttempt(x, "report@1", RunOutcome::kSucceeded);
    x.Stop();
    EXPECT_EQ(x.stats().batches_failed, 1u);
    EXPECT_THAT(x.stats().last_error,
                HasSubstr("TLS: the certificate of localhost:" + std::to_string(collector.port()) +
                          " was not verified"));
  }
  EXPECT_EQ(posts.load(), 0);
  o.tls.ca_file = pki.Path("ca.pem");
  o.tls.cert_file = pki.Path("client.pem");
  o.tls.key_file = pki.Path("client.key");
  OtlpExporter x(o, SystemClock::Get());
  FeedAttempt(x, "report@1", RunOutcome::kSucceeded);
  x.Stop();
  EXPECT_EQ(x.stats().spans_exported, 4u) << x.stats().last_error;
  EXPECT_EQ(posts.load(), 1);
  EXPECT_EQ(client, "gnomon-client");
}

TEST(OtlpExporterTest, ALinkLocalCollectorIsRefusedByTheEgressRule) {
  TracingOptions o;
  o.endpoint = "http://169.254.169.254:4318/v1/traces";
  o.flush_interval = std::chrono::hours(1);
  OtlpExporter x(o, SystemClock::Get());
  FeedAttempt(x, "report@1", RunOutcome::kSucceeded);
  x.Stop();
  EXPECT_EQ(x.stats().batches_failed, 1u);
  EXPECT_EQ(x.stats().last_error,
            "POST http://169.254.169.254:4318/v1/traces: egress: 169.254.169.254 is denied by "
            "egress_deny "
            "169.254.0.0/16");
}

TEST(OtlpExporterTest, DeadCollectorCountsFailuresAndStopReturns) {
  std::string endpoint;
  {
    Receiver gone;  // its port, closed again
    ASSERT_TRUE(gone.ready());
    endpoint = gone.endpoint();
  }
  TracingOptions o;
  o.endpoint = endpoint;
  o.flush_interval = std::chrono::hours(1);
  o.timeout = std::chrono::seconds(5);
  OtlpExporter x(o, SystemClock::Get());
  FeedAttempt(x, "report@1", RunOutcome::kSucceeded);
  x.Stop();
  const OtlpExporter::Stats st = x.stats();
  EXPECT_EQ(st.batches_failed, 1u);
  EXPECT_EQ(st.spans_dropped, 4u);
  // After Stop, events are dropped (there is nobody to send them).
  FeedAttempt(x, "report@2", RunOutcome::kSucceeded);
  EXPECT_EQ(x.stats().spans_dropped, 4u);
}

TEST(OtlpExporterTest, EvictsAttemptsThatNeverFinish) {
  Receiver r;
  ASSERT_TRUE(r.ready());
  TracingOptions o = Options(r);
  o.queue_capacity = 2;
  OtlpExporter x(o, SystemClock::Get());
  for (int i = 0; i < 5; ++i) {  // claimed, then dispatched elsewhere: no end event here
    x.Record(Event(SchedulerEvent::Kind::kClaimed, "q@" + std::to_string(i), 1, 1'000'000), "");
  }
  EXPECT_EQ(x.stats().spans_dropped, 3u);
  x.Stop();
  EXPECT_EQ(x.stats().spans_dropped, 5u);  // the two still open at Stop
  EXPECT_TRUE(r.bodies().empty());
}

}  // namespace
}  // namespace gnomon::server
