// The control plane tried as an attacker would (docs/reliability.md "Attacks on the control
// plane"), against a real server on a loopback port: requests from other origins and for other
// hosts, bodies that are not JSON, tokens limited to a namespace reading or changing another's
// jobs, runs, cursors, audit records, metrics and secrets, floods of failing calls, auth failures
// that must leave a trace, and token rotation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/memory_coordinator.h"
#include "gnomon/testing/recording_executor.h"
#include "src/server/test_api_server.h"

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr char kAdmin[] = "admin-secret-0123456789";
constexpr char kOperate[] = "operate-secret-0123456789";
constexpr char kBillingRead[] = "billing-read-0123456789";
constexpr char kBillingOps[] = "billing-ops-0123456789";
constexpr char kBillingAdmin[] = "billing-admin-0123456789";
constexpr char kEtlAdmin[] = "etl-admin-0123456789";

class ApiSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SchedulerOptions o;
    o.node_id = "n1";
    o.observer = &observer_;
    o.worker_threads = 2;
    scheduler_ = std::make_unique<Scheduler>(o, coord_, exec_, clock_);
    ASSERT_TRUE(scheduler_->Start().ok());
    log_ = std::tmpfile();
    ASSERT_NE(log_, nullptr);
    logger_ = std::make_unique<Logger>(LogFormat::kText, LogLevel::kInfo, "n1", log_);
  }
  void TearDown() override {
    if (server_) server_->server.Stop();
    scheduler_->Stop();
    std::fclose(log_);
  }

  void Start(HttpApiOptions o = {}, JobCatalogOptions c = {}) {
    o.clock = &clock_;
    o.logger = logger_.get();
    server_ = std::make_unique<TestApiServer>(
        *scheduler_, coord_, metrics_,
        std::vector<ApiToken>{{"adm", kAdmin, TokenRole::kAdmin, {}},
                              {"ops", kOperate, TokenRole::kOperate, {}},
                              {"bill-read", kBillingRead, TokenRole::kRead, {"billing."}},
                              {"bill-ops", kBillingOps, TokenRole::kOperate, {"billing."}},
                              {"bill-admin", kBillingAdmin, TokenRole::kAdmin, {"billing."}},
                              {"etl-admin", kEtlAdmin, TokenRole::kAdmin, {"etl."}}},
        o, HttpServerOptions{}, c);
    ASSERT_TRUE(server_->Start().ok());
    client_ = server_->Client();
  }

  static httplib::Headers Auth(std::string_view token, httplib::Headers extra = {}) {
    extra.emplace("Authorization", "Bearer " + std::string(token));
    return extra;
  }
  static json Body(const httplib::Result& r) { return json::parse(r->body, nullptr, false); }
  httplib::Result Create(const json& spec, std::string_view token = kAdmin) {
    return client_->Post("/api/v1/jobs", Auth(token), spec.dump(), "application/json");
  }
  std::string Log() {
    std::fflush(log_);
    std::rewind(log_);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, log_)) > 0) out.append(buf, n);
    return out;
  }
  std::string Metrics() { return client_->Get("/metrics", Auth(kAdmin))->body; }

  testing::FakeClock clock_{Instant::FromUnixSeconds(1772323205)};
  testing::MemoryCoordinator coord_{clock_};
  testing::RecordingExecutor exec_;
  MetricsObserver metrics_{"9.9.9"};
  testing::RecordingObserver events_;
  CompositeObserver observer_{{&metrics_, &events_}};
  std::unique_ptr<Scheduler> scheduler_;
  FILE* log_ = nullptr;
  std::unique_ptr<Logger> logger_;
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

const json kBillingJob = {{"id", "billing.settle"},
                          {"schedule", "@yearly"},
                          {"command", "true"},
                          {"env", {{"DB_PASSWORD", "hunter2-billing"}}}};
const json kHttpJob = {
    {"id", "billing.hook"},
    {"schedule", "@yearly"},
    {"http", {{"url", "http://127.0.0.1:9/x"}, {"headers", {{"Authorization", "Bearer s3cr3t"}}}}}};

// A page of another origin can send simple requests (forms, text/plain, no-cors fetches) with the
// user's network position: all are refused before anything is created or run.
TEST_F(ApiSecurityTest, CrossOriginRequestsAreRefused) {
  Start();
  const std::string self = "http://127.0.0.1:" + std::to_string(server_->port());
  const std::string job = json{{"id", "evil"}, {"schedule", "@yearly"}, {"command", "id"}}.dump();
  // A JSON body from another origin.
  auto foreign = client_->Post("/api/v1/jobs", Auth(kAdmin, {{"Origin", "http://evil.example"}}),
                               job, "application/json");
  EXPECT_EQ(foreign->status, 403);
  EXPECT_EQ(Body(foreign)["error"]["code"], "cross_origin");
  // Sandboxed frames send "null".
  EXPECT_EQ(
      client_->Post("/api/v1/jobs", Auth(kAdmin, {{"Origin", "null"}}), job, "application/json")
          ->status,
      403);
  // Same host, other port: another origin.
  EXPECT_EQ(client_
                ->Post("/api/v1/jobs", Auth(kAdmin, {{"Origin", "http://127.0.0.1:1"}}), job,
                       "application/json")
                ->status,
            403);
  // Simple requests: a form or text/plain body is never parsed.
  for (const char* type :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""}) {
    auto r = client_->Post("/api/v1/jobs", Auth(kAdmin), job, type);
    EXPECT_EQ(r->status, 415) << type;
  }
  auto fetch_site = client_->Post("/api/v1/jobs/evil/trigger",
                                  Auth(kAdmin, {{"Sec-Fetch-Site", "cross-site"}}), "", "");
  EXPECT_EQ(fetch_site->status, 403);
  EXPECT_TRUE(coord_.ListJobs()->empty());
  // The page's own origin works; so does a client that sends no Origin (curl, the CLI).
  EXPECT_EQ(client_
                ->Post("/api/v1/jobs", Auth(kAdmin, {{"Origin", self}}), job,
                       "application/json; charset=utf-8")
                ->status,
            201);
  EXPECT_EQ(client_
                ->Post("/api/v1/jobs/evil/pause",
                       Auth(kAdmin, {{"Origin", self}, {"Sec-Fetch-Site", "same-origin"}}), "", "")
                ->status,
            200);
  // API answers are never cached.
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(kAdmin))->get_header_value("Cache-Control"),
            "no-store");
  EXPECT_EQ(client_->Get("/healthz")->get_header_value("Cache-Control"), "no-store");
}

// DNS rebinding: a name the attacker controls resolves to this server; the browser sends it.
TEST_F(ApiSecurityTest, ForeignHostsAreRefused) {
  HttpApiOptions o;
  o.allowed_hosts = {"gnomon.internal"};
  Start(o);
  const std::string port = std::to_string(server_->port());
  auto rebound = client_->Get("/api/v1/jobs", Auth(kAdmin, {{"Host", "evil.example:" + port}}));
  EXPECT_EQ(rebound->status, 421);
  EXPECT_EQ(Body(rebound)["error"]["code"], "misdirected_request");
  EXPECT_EQ(client_->Get("/", {{"Host", "evil.example"}})->status, 421);  // the dashboard too
  for (const std::string& host : std::vector<std::string>{
           "127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "10.1.2.3:8080", "[::1]:" + port,
           "gnomon.internal:443", "GNOMON.internal"}) {
    EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(kAdmin, {{"Host", host}}))->status, 200) << host;
  }
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(kAdmin, {{"Host", "gnomon.internal.evil"}}))->status,
            421);
}

// Env values and HTTP header values are write-only below admin of the job's namespace.
TEST_F(ApiSecurityTest, SecretsAreShownOnlyToAdminsOfTheirNamespace) {
  Start();
  ASSERT_EQ(Create(kBillingJob, kBillingAdmin)->status, 201);
  ASSERT_EQ(Create(kHttpJob, kBillingAdmin)->status, 201);
  auto shown = [&](std::string_view token, const char* path) {
    return client_->Get(path, Auth(token))->body;
  };
  for (const char* path :
       {"/api/v1/jobs/billing.settle", "/api/v1/jobs", "/api/v1/jobs/billing.hook"}) {
    for (std::string_view token : {kBillingRead, kBillingOps, kOperate}) {
      const std::string body = shown(token, path);
      EXPECT_THAT(body, Not(HasSubstr("hunter2"))) << path << " " << token;
      EXPECT_THAT(body, Not(HasSubstr("s3cr3t"))) << path << " " << token;
    }
  }
  EXPECT_THAT(shown(kBillingRead, "/api/v1/jobs/billing.settle"), HasSubstr("(secret)"));
  // Admins of the namespace (and global admins) see the values.
  EXPECT_THAT(shown(kBillingAdmin, "/api/v1/jobs/billing.settle"), HasSubstr("hunter2-billing"));
  EXPECT_THAT(shown(kAdmin, "/api/v1/jobs/billing.hook"), HasSubstr("s3cr3t"));
  // The audit log never holds them, whoever reads it.
  EXPECT_THAT(shown(kAdmin, "/api/v1/audit"), Not(HasSubstr("hunter2")));
  EXPECT_THAT(shown(kAdmin, "/api/v1/audit"), Not(HasSubstr("s3cr3t")));
  const std::vector<AuditRecord> records = *coord_.ListAudit(100, 0);
  for (const AuditRecord& r : records) {
    EXPECT_THAT(r.after, Not(HasSubstr("hunter2")));
    EXPECT_THAT(r.after, Not(HasSubstr("s3cr3t")));
  }
  // Write-only: sending the placeholder back keeps the stored value; a new value replaces it.
  json edit = kBillingJob;
  edit["env"] = {{"DB_PASSWORD", "(secret)"}, {"MODE", "strict"}};
  auto kept = client_->Put("/api/v1/jobs/billing.settle", Auth(kBillingAdmin, {{"If-Match", "1"}}),
                           edit.dump(), "application/json");
  ASSERT_EQ(kept->status, 200) << kept->body;
  EXPECT_EQ(scheduler_->GetJob("billing.settle")->spec.env.at("DB_PASSWORD"), "hunter2-billing");
  edit["env"] = {{"NEW_KEY", "(secret)"}};
  auto unknown = client_->Put("/api/v1/jobs/billing.settle", Auth(kAdmin, {{"If-Match", "2"}}),
                              edit.dump(), "application/json");
  EXPECT_EQ(unknown->status, 400);
  EXPECT_THAT(Body(unknown)["error"]["message"].get<std::string>(), HasSubstr("env.NEW_KEY"));
}

// A token limited to a namespace neither reads nor changes another namespace's jobs and runs, and
// sees only its own audit records, metrics series and running counts.
TEST_F(ApiSecurityTest, NamespacesIsolateReadsAndWrites) {
  Start();
  ASSERT_EQ(Create(kBillingJob)->status, 201);
  ASSERT_EQ(Create({{"id", "etl.load"}, {"schedule", "@yearly"}, {"command", "true"}})->status,
            201);
  auto trigger_both = [&] {
    ASSERT_EQ(client_->Post("/api/v1/jobs/etl.load/trigger", Auth(kAdmin), "", "")->status, 202);
    clock_.Advance(std::chrono::milliseconds(1));
    ASSERT_EQ(client_->Post("/api/v1/jobs/billing.settle/trigger", Auth(kAdmin), "", "")->status,
              202);
    clock_.Advance(std::chrono::milliseconds(1));
  };
  trigger_both();
  // Announced once reported: the runs list has them, and the triggers below find them closed.
  ASSERT_TRUE(events_.Await(SchedulerEvent::Kind::kRunFinished, 2));
  // Writes and reads of the other namespace.
  EXPECT_EQ(client_->Post("/api/v1/jobs/etl.load/trigger", Auth(kBillingOps), "", "")->status, 403);
  EXPECT_EQ(client_->Get("/api/v1/jobs/etl.load", Auth(kBillingRead))->status, 403);
  EXPECT_EQ(client_->Delete("/api/v1/jobs/etl.load", Auth(kBillingAdmin))->status, 403);
  EXPECT_EQ(client_->Get("/api/v1/runs?job=etl.load", Auth(kBillingRead))->status, 403);
  // Lists: only billing's.
  const std::string jobs = client_->Get("/api/v1/jobs", Auth(kBillingRead))->body;
  EXPECT_THAT(jobs, HasSubstr("billing.settle"));
  EXPECT_THAT(jobs, Not(HasSubstr("etl.")));
  const std::string runs = client_->Get("/api/v1/runs?limit=1", Auth(kBillingRead))->body;
  EXPECT_THAT(runs, HasSubstr("billing.settle"));
  EXPECT_THAT(runs, Not(HasSubstr("etl.")));
  // Metrics: series labelled by another namespace's jobs are left out.
  const std::string mine = client_->Get("/metrics", Auth(kBillingRead))->body;
  const std::string all = Metrics();
  EXPECT_THAT(all, HasSubstr("job=\"etl.load\""));
  EXPECT_THAT(mine, Not(HasSubstr("etl.load")));
  EXPECT_THAT(mine, HasSubstr("gnomon_jobs 1\n"));
  // Nodes: the running count is of the caller's jobs (two runs held: one of billing).
  exec_.SetBehavior([&](const JobSpec&, const RunContext& ctx) {
    exec_.WaitForStopOrRelease(ctx);
    return ExecResult{};
  });
  trigger_both();
  ASSERT_TRUE(exec_.AwaitStarted(4));
  NodeInfo node;
  node.node_id = "n1";
  node.running = 2;
  ASSERT_TRUE(coord_.Heartbeat(node, std::chrono::minutes(1)).ok());
  json nodes = Body(client_->Get("/api/v1/nodes", Auth(kBillingRead)));
  ASSERT_EQ(nodes["nodes"].size(), 1u) << nodes.dump();
  EXPECT_EQ(nodes["nodes"][0]["running"], 1);
  nodes = Body(client_->Get("/api/v1/nodes", Auth(kAdmin)));
  EXPECT_EQ(nodes["nodes"][0]["running"], 2);
  exec_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(4));
}

// The audit log a namespaced admin reads holds its namespace's records only, and its pages end
// at records it may see.
TEST_F(ApiSecurityTest, NamespacedAdminsReadOnlyTheirAuditRecords) {
  Start();
  ASSERT_EQ(Create({{"id", "etl.a"}, {"schedule", "@yearly"}, {"command", "x"}}, kEtlAdmin)->status,
            201);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(
        Create(
            {{"id", "billing.j" + std::to_string(i)}, {"schedule", "@yearly"}, {"command", "true"}},
            kBillingAdmin)
            ->status,
        201);
    ASSERT_EQ(client_->Post("/api/v1/jobs/etl.a/pause", Auth(kEtlAdmin), "", "")->status, 200);
  }
  json page = Body(client_->Get("/api/v1/audit?limit=2", Auth(kBillingAdmin)));
  ASSERT_EQ(page["entries"].size(), 2u);
  std::set<std::string> seen;
  while (true) {
    for (const json& e : page["entries"]) {
      EXPECT_EQ(e["target"].get<std::string>().rfind("billing.", 0), 0u) << e.dump();
      seen.insert(e["target"].get<std::string>());
    }
    if (!page.contains("next_before")) break;
    page = Body(client_->Get(
        "/api/v1/audit?limit=2&before=" + std::to_string(page["next_before"].get<int64_t>()),
        Auth(kBillingAdmin)));
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_THAT(client_->Get("/api/v1/audit", Auth(kAdmin))->body, HasSubstr("etl.a"));
}

// The runs list of a namespaced reader never carries another namespace's job id, in its records
// or its cursor, also when the budget of records read for one page runs out among others' runs.
TEST_F(ApiSecurityTest, RunCursorsNameOnlyVisibleJobs) {
  HttpApiOptions o;
  o.runs_scan_budget = 25;
  Start(o);
  // History: billing.a at 1, 2, 3 s; 100 runs of aaa.x, zzz.y at every second in between.
  auto record = [&](const std::string& job, int64_t s) {
    ClaimRequest req;
    req.fire = FireKey{job, Instant::FromUnixSeconds(s)};
    req.node_id = "n9";
    req.skew_tolerance = std::chrono::hours(24 * 365 * 100);
    Result<ClaimOutcome> c = coord_.Claim(req);
    ASSERT_TRUE(c.ok() && c->claim);
    RunRecord r;
    r.run_id = req.fire.RunId();
    r.job_id = job;
    r.scheduled_at = req.fire.scheduled_at;
    r.attempt = 1;
    r.fencing_token = c->claim->fencing_token;
    r.node_id = "n9";
    r.outcome = RunOutcome::kSucceeded;
    ASSERT_TRUE(coord_.Report(*c->claim, r, true).ok());
  };
  for (int64_t s = 1; s <= 60; ++s) {
    record("aaa.x", s);
    record("zzz.y", s);
    if (s % 20 == 0) record("billing.a", s);
  }
  std::vector<std::string> seen;
  std::string cursor;
  for (int page = 0; page < 100; ++page) {
    auto r = client_->Get("/api/v1/runs?limit=2&cursor=" + cursor, Auth(kBillingRead));
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_THAT(r->body, Not(HasSubstr("aaa.x")));
    EXPECT_THAT(r->body, Not(HasSubstr("zzz.y")));
    json j = Body(r);
    for (const json& run : j["runs"]) seen.push_back(run["run_id"]);
    cursor = j["next_cursor"];
    if (cursor.empty()) break;
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"billing.a@60000", "billing.a@40000", "billing.a@20000"}));
}

// Failing calls are audited apart (their own cap) and rate limited: a flood of them by an
// operate token never evicts the record of an admin's change.
TEST_F(ApiSecurityTest, AFloodOfFailingCallsKeepsTheAdminRecords) {
  HttpApiOptions o;
  o.mutations_per_minute = 60;
  o.mutation_burst = 50;
  JobCatalogOptions c;
  c.audit.keep = 10;
  c.audit.keep_failed = 10;
  Start(o, c);
  ASSERT_EQ(Create(kBillingJob)->status, 201);
  int limited = 0;
  std::string retry_after;
  for (int i = 0; i < 80; ++i) {
    auto r =
        client_->Post("/api/v1/jobs/nope" + std::to_string(i) + "/trigger", Auth(kOperate), "", "");
    if (r->status == 429) {
      ++limited;
      retry_after = r->get_header_value("Retry-After");
    } else {
      EXPECT_EQ(r->status, 404);
    }
  }
  EXPECT_EQ(limited, 30);  // burst 50, then nothing replenished (the clock does not move)
  EXPECT_EQ(retry_after, "1");
  json audit = Body(client_->Get("/api/v1/audit?limit=100", Auth(kAdmin)));
  int creates = 0, failed = 0;
  for (const json& e : audit["entries"]) {
    creates += e["action"] == "create" && e["status"] == 201;
    failed += e["status"].get<int>() >= 400;
  }
  EXPECT_EQ(creates, 1);
  EXPECT_EQ(failed, 10);
  EXPECT_THAT(Metrics(), HasSubstr("gnomon_http_rate_limited_total 30"));
  // Another token has its own bucket.
  EXPECT_EQ(client_->Post("/api/v1/jobs/billing.settle/pause", Auth(kBillingOps), "", "")->status,
            200);
  // Time refills the bucket.
  clock_.Advance(std::chrono::seconds(2));
  EXPECT_EQ(client_->Post("/api/v1/jobs/nope/trigger", Auth(kOperate), "", "")->status, 404);
}

// Every 401 and 403 leaves a log line (who, from where, what) and a count by reason.
TEST_F(ApiSecurityTest, AuthFailuresAreLoggedAndCounted) {
  Start();
  EXPECT_EQ(client_->Get("/api/v1/jobs")->status, 401);
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth("not-a-token-at-all-0123"))->status, 401);
  EXPECT_EQ(client_->Post("/api/v1/jobs", Auth(kOperate), "{}", "application/json")->status, 403);
  EXPECT_EQ(client_->Get("/api/v1/jobs/etl.x", Auth(kBillingRead))->status, 403);
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(kAdmin, {{"Origin", "http://evil"}}))->status, 403);
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("auth_failed"));
  EXPECT_THAT(log, HasSubstr("reason=missing_token"));
  EXPECT_THAT(log, HasSubstr("reason=invalid_token"));
  EXPECT_THAT(log, HasSubstr("token=ops"));
  EXPECT_THAT(log, HasSubstr("reason=role"));
  EXPECT_THAT(log, HasSubstr("token=bill-read"));
  EXPECT_THAT(log, HasSubstr("reason=namespace"));
  EXPECT_THAT(log, HasSubstr("path=/api/v1/jobs/etl.x"));
  EXPECT_THAT(log, HasSubstr("remote=127.0.0.1"));
  EXPECT_THAT(log, HasSubstr("reason=origin"));
  EXPECT_THAT(log, Not(HasSubstr("not-a-token-at-all")));  // never the presented secret
  const std::string metrics = Metrics();
  for (const char* reason : {"missing_token", "invalid_token", "role", "namespace", "origin"}) {
    EXPECT_THAT(metrics, HasSubstr(std::string("gnomon_http_auth_failures_total{reason=\"") +
                                   reason + "\"} 1"))
        << reason;
  }
}

// A flood of auth failures cannot flood the log: lines are limited per second, the rest counted.
TEST_F(ApiSecurityTest, AuthFailureLogLinesAreBounded) {
  Start();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(client_->Get("/api/v1/jobs")->status, 401);
  const std::string log = Log();
  size_t lines = 0;
  for (size_t at = log.find("auth_failed"); at != std::string::npos;
       at = log.find("auth_failed", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, static_cast<size_t>(kAuthLogPerSecond));
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(client_->Get("/api/v1/jobs")->status, 401);
  EXPECT_THAT(Log(), HasSubstr("suppressed_before=180"));
  EXPECT_THAT(Metrics(),
              HasSubstr("gnomon_http_auth_failures_total{reason=\"missing_token\"} 201"));
}

// Tokens are replaced while serving (SIGHUP): a revoked token stops working at once.
TEST_F(ApiSecurityTest, TokensCanBeRotated) {
  Start();
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(kOperate))->status, 200);
  const std::string fresh = "rotated-secret-0123456789";
  ASSERT_TRUE(server_->api
                  .SetTokens({{"adm", kAdmin, TokenRole::kAdmin, {}},
                              {"ops", fresh, TokenRole::kOperate, {}}})
                  .ok());
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(kOperate))->status, 401);
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(fresh))->status, 200);
  // An invalid set changes nothing.
  EXPECT_FALSE(server_->api.SetTokens({{"x", "short", TokenRole::kAdmin, {}}}).ok());
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(fresh))->status, 200);
}

// Definitions the executors would only refuse at run time get a 400 naming the field at once.
TEST_F(ApiSecurityTest, LateFailingDefinitionsAreRefusedAtOnce) {
  Start();
  const json hook = {{"id", "hook"}, {"schedule", "@yearly"}, {"http", {{"url", "http://h/"}}}};
  auto refused = [&](json spec, const std::string& field) {
    auto r = Create(spec);
    EXPECT_EQ(r->status, 400) << spec.dump();
    EXPECT_THAT(Body(r)["error"]["message"].get<std::string>(), HasSubstr(field)) << spec.dump();
  };
  json j = hook;
  j["http"]["headers"] = {{"X-A", "1\r\nX-Injected: 2"}};
  refused(j, "http.headers.X-A");
  j = hook;
  j["http"]["headers"] = {{"X-A:B", "1"}};
  refused(j, "http.headers");
  j = hook;
  j["http"]["url"] = "http://user:secret@h/";
  refused(j, "http.url");
  j = hook;
  j["http"]["url"] = "http://h/\r\nX: y";
  refused(j, "http.url");
  refused({{"id", "a"}, {"schedule", "@yearly"}, {"argv", json::array({""})}}, "argv[0]");
  refused({{"id", ".."}, {"schedule", "@yearly"}, {"command", "true"}}, "id");
  refused({{"id", "."}, {"schedule", "@yearly"}, {"command", "true"}}, "id");
  EXPECT_EQ(client_->Get("/api/v1/jobs/..", Auth(kAdmin))->status, 400);
  EXPECT_TRUE(coord_.ListJobs()->empty());
}

}  // namespace
}  // namespace gnomon::server
