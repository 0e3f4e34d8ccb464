// Namespace quotas: max_jobs on API creates (403), max_concurrent_runs on triggers (429) and in
// the scheduler's admission (a fire over the limit is recorded as skipped "quota: ..."). A real
// HTTP server on a free loopback port; the scheduler on a FakeClock and an in-memory coordinator.
#include "src/server/quota.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/memory_coordinator.h"
#include "gnomon/testing/recording_executor.h"
#include "src/server/http_api.h"
#include "src/server/test_api_server.h"

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using Kind = SchedulerEvent::Kind;

constexpr char kAdmin[] = "admin-secret-0123456789";

class QuotaTest : public ::testing::Test {
 protected:
  void Start(std::vector<NamespaceQuota> list) {
    list_ = list;
    Result<Quotas> q = Quotas::Make(std::move(list), coord_);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    quotas_ = std::make_unique<Quotas>(std::move(*q));
    SchedulerOptions o;
    o.node_id = "n1";
    o.observer = &observer_;
    o.worker_threads = 4;
    o.shutdown_grace = Duration(0);
    o.admit = [this](const JobSpec& job, const Claim& claim) { return quotas_->Admit(job, claim); };
    scheduler_ = std::make_unique<Scheduler>(o, coord_, exec_, clock_);
    ASSERT_TRUE(scheduler_->Start().ok());
    HttpApiOptions api;
    api.clock = &clock_;
    server_ = std::make_unique<TestApiServer>(
        *scheduler_, coord_, metrics_,
        std::vector<ApiToken>{{"adm", kAdmin, TokenRole::kAdmin, {}}}, api);
    quotas_->Bind(scheduler_.get(), &server_->catalog);
    Result<Quotas> served = Quotas::Make(list_, coord_);
    ASSERT_TRUE(served.ok());
    served->Bind(scheduler_.get(), &server_->catalog);
    server_->api.SetQuotas(std::move(*served));
    ASSERT_TRUE(server_->Start().ok());
    client_ = server_->Client();
  }
  void TearDown() override {
    exec_.Release();
    if (server_) server_->server.Stop();
    if (scheduler_) scheduler_->Stop();
  }
  static httplib::Headers Auth() { return {{"Authorization", std::string("Bearer ") + kAdmin}}; }
  httplib::Result Create(const std::string& id) {
    return client_->Post("/api/v1/jobs", Auth(),
                         R"({"id":")" + id + R"(","schedule":"@yearly","command":"true"})",
                         "application/json");
  }
  httplib::Result Trigger(const std::string& id) {
    return client_->Post("/api/v1/jobs/" + id + "/trigger", Auth(), "", "text/plain");
  }

  testing::FakeClock clock_{Instant::FromUnixSeconds(1772323205)};
  testing::MemoryCoordinator coord_{clock_};
  testing::RecordingExecutor exec_;
  testing::RecordingObserver observer_;
  MetricsObserver metrics_{"9.9.9"};
  std::unique_ptr<Quotas> quotas_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<NamespaceQuota> list_;
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(QuotaTest, MaxJobsRefusesCreatesWith403) {
  Start({{"billing.", 2, 0}, {"billing.eu.", 1, 0}});
  EXPECT_EQ(Create("billing.a")->status, 201);
  EXPECT_EQ(Create("billing.b")->status, 201);
  auto over = Create("billing.c");
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 403);
  json body = json::parse(over->body);
  EXPECT_EQ(body["error"]["code"], "quota_exceeded");
  EXPECT_THAT(body["error"]["message"].get<std::string>(),
              HasSubstr("namespace \"billing.\" has 2 jobs (max_jobs = 2)"));
  EXPECT_FALSE(scheduler_->GetJob("billing.c").has_value());
  // The longest namespace decides: billing.eu.* count against their own quota only.
  EXPECT_EQ(Create("billing.eu.x")->status, 201);
  EXPECT_EQ(Create("billing.eu.y")->status, 403);
  // Outside any quota: no limit.
  EXPECT_EQ(Create("other")->status, 201);
  // Room again after a delete.
  EXPECT_EQ(client_->Delete("/api/v1/jobs/billing.a", Auth())->status, 204);
  EXPECT_EQ(Create("billing.c")->status, 201);
}

TEST_F(QuotaTest, MaxConcurrentRunsRefusesTriggersWith429AndSkipsFires) {
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    exec_.WaitForStopOrRelease(ctx);
    return ExecResult{};
  });
  Start({{"etl.", 0, 1}});
  ASSERT_EQ(Create("etl.load")->status, 201);
  ASSERT_EQ(Create("etl.clean")->status, 201);
  ASSERT_EQ(Create("free")->status, 201);
  ASSERT_EQ(Trigger("etl.load")->status, 202);
  ASSERT_TRUE(exec_.AwaitStarted(1));

  // The namespace is at its limit: a trigger of another of its jobs is a 429 with Retry-After.
  auto refused = Trigger("etl.clean");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "5");
  EXPECT_THAT(refused->body, HasSubstr("max_concurrent_runs = 1"));
  // Other namespaces are not limited.
  EXPECT_EQ(Trigger("free")->status, 202);
  ASSERT_TRUE(exec_.AwaitStarted(2));

  // A fire that gets past the API (a scheduled one) is claimed, counted with the running one,
  // and recorded as skipped instead of run.
  clock_.Advance(std::chrono::milliseconds(5));
  Result<std::string> run = scheduler_->TriggerNow("etl.clean");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(observer_.Await(Kind::kSkipped, 1, "quota"));
  Result<std::vector<RunRecord>> skipped = coord_.GetRun(*run);
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(skipped->back().outcome, RunOutcome::kSkipped);
  EXPECT_THAT(skipped->back().skip_reason, HasSubstr("quota: namespace \"etl.\""));
  EXPECT_EQ(exec_.started(), 2);

  // Once the run finishes, the namespace has room again.
  exec_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(2));
  ASSERT_TRUE(observer_.Await(Kind::kRunFinished, 2));
  clock_.Advance(std::chrono::milliseconds(5));
  EXPECT_EQ(Trigger("etl.clean")->status, 202);
  ASSERT_TRUE(exec_.AwaitFinished(3));
}

TEST(QuotasTest, BadQuotasAreRejected) {
  testing::FakeClock clock;
  testing::MemoryCoordinator coord(clock);
  EXPECT_FALSE(Quotas::Make({{"", 1, 1}}, coord).ok());
  EXPECT_FALSE(Quotas::Make({{"a.", 1, 1}, {"a.", 2, 2}}, coord).ok());
  EXPECT_FALSE(Quotas::Make({{"a.", -1, 0}}, coord).ok());
  Result<Quotas> q = Quotas::Make({{"a.", 1, 0}, {"a.b.", 1, 0}}, coord);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->For("a.b.c")->ns, "a.b.");
  EXPECT_EQ(q->For("a.c")->ns, "a.");
  EXPECT_EQ(q->For("b"), nullptr);
}

}  // namespace
}  // namespace gnomon::server
