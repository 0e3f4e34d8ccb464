// The HTTP API against a real server on a free loopback port, driven by httplib::Client; the
// scheduler runs on a FakeClock with an in-memory coordinator and a recording executor.
#include "src/server/http_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/forwarding_coordinator.h"
#include "gnomon/testing/memory_coordinator.h"
#include "gnomon/testing/recording_executor.h"
#include "src/server/job_json.h"
#include "src/server/run_json.h"
#include "src/server/test_api_server.h"
#include "src/server/web_assets.h"

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kAdmin[] = "admin-secret-0123456789";
constexpr char kOperate[] = "operate-secret-0123456789";
constexpr char kRead[] = "read-secret-0123456789";
constexpr char kBilling[] = "billing-secret-0123456789";

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SchedulerOptions o;
    o.node_id = "n1";
    o.observer = &observer_;
    o.worker_threads = 2;
    scheduler_ = std::make_unique<Scheduler>(o, coord_, exec_, clock_);
    cfg_.id = "cfg";
    cfg_.schedule = "0 * * * *";
    cfg_.command = "true";
    cfg_.source = "jobs.toml:3";
    cfg_.read_only = true;
    ASSERT_TRUE(scheduler_->Start().ok());
  }
  void TearDown() override {
    if (server_) server_->server.Stop();
    scheduler_->Stop();
  }

  void StartApi(std::vector<ApiToken> tokens, HttpApiOptions o = {}, HttpServerOptions http = {}) {
    o.clock = &clock_;
    server_ = std::make_unique<TestApiServer>(*scheduler_, coord_, metrics_, std::move(tokens), o,
                                              std::move(http));
    ASSERT_TRUE(server_->catalog.SetStaticJobs({*CompileJob(cfg_)}).ok());
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    client_ = server_->Client();
  }
  void StartWithTokens(HttpServerOptions http = {}) {
    StartApi({{"adm", kAdmin, TokenRole::kAdmin, {}},
              {"ops", kOperate, TokenRole::kOperate, {}},
              {"ro", kRead, TokenRole::kRead, {}},
              {"bill", kBilling, TokenRole::kAdmin, {"billing."}}},
             {}, std::move(http));
  }
  // No authentication (auth = "none"): every caller is an anonymous admin.
  void StartWithoutAuth() {
    HttpApiOptions o;
    o.auth = AuthMode::kNone;
    StartApi({}, o);
  }

  static httplib::Headers Auth(std::string_view token) {
    return {{"Authorization", "Bearer " + std::string(token)}};
  }
  static json Body(const httplib::Result& r) { return json::parse(r->body, nullptr, false); }

  httplib::Result Create(const std::string& body, std::string_view token = kAdmin) {
    return client_->Post("/api/v1/jobs", Auth(token), body, "application/json");
  }

  testing::FakeClock clock_;
  testing::MemoryCoordinator coord_{clock_};
  testing::RecordingExecutor exec_;
  MetricsObserver metrics_{"9.9.9"};
  testing::RecordingObserver events_;
  CompositeObserver observer_{{&metrics_, &events_}};
  JobSpec cfg_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

const char kJob[] = R"({"id":"dyn","schedule":"*/5 * * * *","command":"echo hi"})";

// The OpenAPI document's JobSpec names every key a definition is written with (its schema
// forbids others), so the document cannot drift from the JSON the API reads and writes.
TEST_F(HttpApiTest, TheOpenApiJobSpecHasEveryKeyOfTheJobJson) {
  StartWithTokens();
  auto doc = client_->Get("/api/v1/openapi.json");
  ASSERT_TRUE(doc);
  const json props = Body(doc)["components"]["schemas"]["JobSpec"]["properties"];
  ASSERT_TRUE(props.is_object());
  JobSpec full = cfg_;
  full.http = HttpTarget{"http://127.0.0.1:9/", "POST", {{"X-A", "b"}}};
  const json written = JobSpecToJson(full);
  for (const auto& [key, value] : written.items()) {
    EXPECT_TRUE(props.contains(key)) << key << " is not in the OpenAPI JobSpec";
  }
}

TEST_F(HttpApiTest, HealthReadyOpenApi) {
  StartWithTokens();
  auto h = client_->Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto r = client_->Get("/readyz");
  EXPECT_EQ(r->status, 200);
  // A starting node (its API jobs not loaded yet) is alive but not ready.
  server_->api.SetReady(false);
  auto starting = client_->Get("/readyz");
  EXPECT_EQ(starting->status, 503);
  EXPECT_THAT(Body(starting)["error"]["message"].get<std::string>(), HasSubstr("starting"));
  EXPECT_EQ(client_->Get("/healthz")->status, 200);
  server_->api.SetReady(true);
  EXPECT_EQ(client_->Get("/readyz")->status, 200);
  auto doc = client_->Get("/api/v1/openapi.json");
  ASSERT_EQ(doc->status, 200);
  json j = Body(doc);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["openapi"], "3.0.3");
  for (const char* p : {"/healthz", "/readyz", "/metrics", "/api/v1/jobs", "/api/v1/jobs/{id}",
                        "/api/v1/jobs/{id}/pause", "/api/v1/jobs/{id}/resume",
                        "/api/v1/jobs/{id}/trigger", "/api/v1/runs", "/api/v1/runs/{run_id}",
                        "/api/v1/nodes", "/api/v1/cron/preview", "/api/v1/audit"}) {
    EXPECT_TRUE(j["paths"].contains(p)) << p;
  }
  auto missing = client_->Get("/nope", Auth(kRead));
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Body(missing)["error"]["code"], "not_found");
}

TEST_F(HttpApiTest, AuthAndRoleMatrix) {
  StartWithTokens();
  auto none = client_->Get("/api/v1/jobs");
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(Body(none)["error"]["code"], "unauthenticated");
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth("wrong-secret-0123456789"))->status, 401);
  EXPECT_EQ(client_->Get("/metrics")->status, 401);
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(kRead))->status, 200);
  // read cannot operate, operate cannot administer.
  EXPECT_EQ(client_->Post("/api/v1/jobs/cfg/pause", Auth(kRead), "", "")->status, 403);
  EXPECT_EQ(client_->Post("/api/v1/jobs/cfg/pause", Auth(kOperate), "", "")->status, 200);
  EXPECT_EQ(client_->Post("/api/v1/jobs/cfg/resume", Auth(kAdmin), "", "")->status, 200);
  EXPECT_EQ(Create(kJob, kOperate)->status, 403);
  EXPECT_EQ(Create(kJob, kRead)->status, 403);
  EXPECT_EQ(client_->Get("/api/v1/audit", Auth(kOperate))->status, 403);
  EXPECT_EQ(client_->Get("/api/v1/audit", Auth(kAdmin))->status, 200);
  // Namespaces: the billing token sees and creates only billing.* jobs.
  EXPECT_EQ(Create(kJob, kBilling)->status, 403);
  EXPECT_EQ(Create(R"({"id":"billing.x","schedule":"@hourly","command":"true"})", kBilling)->status,
            201);
  json jobs = Body(client_->Get("/api/v1/jobs", Auth(kBilling)));
  ASSERT_EQ(jobs["jobs"].size(), 1u);
  EXPECT_EQ(jobs["jobs"][0]["id"], "billing.x");
}

TEST_F(HttpApiTest, JobsLifecycle) {
  StartWithTokens();
  auto created = Create(kJob);
  ASSERT_EQ(created->status, 201) << created->body;
  json c = Body(created);
  EXPECT_EQ(c["id"], "dyn");
  EXPECT_EQ(c["version"], 1);
  EXPECT_EQ(c["read_only"], false);
  EXPECT_EQ(created->get_header_value("ETag"), "\"1\"");
  EXPECT_TRUE(scheduler_->GetJob("dyn").has_value());
  // The definition is stored in the backend with the jobs-file keys.
  Result<std::vector<StoredJob>> stored = coord_.ListJobs();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_THAT(stored->front().definition, HasSubstr("\"schedule\":\"*/5 * * * *\""));

  EXPECT_EQ(Create(kJob)->status, 409);

  auto list = client_->Get("/api/v1/jobs", Auth(kRead));
  json l = Body(list);
  ASSERT_EQ(l["jobs"].size(), 2u);
  auto one = client_->Get("/api/v1/jobs/dyn", Auth(kRead));
  ASSERT_EQ(one->status, 200);
  json o = Body(one);
  EXPECT_EQ(o["spec"]["command"], "echo hi");
  EXPECT_FALSE(o["schedule_description"].get<std::string>().empty());
  EXPECT_TRUE(o["next_fire"].is_string());
  EXPECT_TRUE(o.contains("last_run"));
  EXPECT_EQ(o["version"], 1);
  EXPECT_EQ(one->get_header_value("ETag"), "\"1\"");
  EXPECT_EQ(client_->Get("/api/v1/jobs/nope", Auth(kRead))->status, 404);
  EXPECT_EQ(client_->Get("/api/v1/jobs/bad%7Bid", Auth(kRead))->status, 400);

  // Replace: needs a version; a stale one is 412.
  const std::string replaced = R"({"schedule":"@daily","command":"echo bye"})";
  EXPECT_EQ(client_->Put("/api/v1/jobs/dyn", Auth(kAdmin), replaced, "application/json")->status,
            428);
  httplib::Headers stale = Auth(kAdmin);
  stale.emplace("If-Match", "\"7\"");
  auto mismatch = client_->Put("/api/v1/jobs/dyn", stale, replaced, "application/json");
  EXPECT_EQ(mismatch->status, 412) << mismatch->body;
  httplib::Headers good = Auth(kAdmin);
  good.emplace("If-Match", "\"1\"");
  auto put = client_->Put("/api/v1/jobs/dyn", good, replaced, "application/json");
  ASSERT_EQ(put->status, 200) << put->body;
  EXPECT_EQ(Body(put)["version"], 2);
  EXPECT_EQ(scheduler_->GetJob("dyn")->spec.schedule, "@daily");
  // A GET right after the change shows its version, with no sync pass in between, and the
  // catalog knows the job under its id only.
  auto after_put = client_->Get("/api/v1/jobs/dyn", Auth(kRead));
  EXPECT_EQ(Body(after_put)["version"], 2);
  EXPECT_EQ(after_put->get_header_value("ETag"), "\"2\"");
  EXPECT_EQ(server_->catalog.Versions(), (std::map<std::string, int64_t>{{"dyn", 2}}));
  // The body's version field works too.
  auto put2 =
      client_->Put("/api/v1/jobs/dyn", Auth(kAdmin),
                   R"({"version":2,"schedule":"@hourly","command":"x"})", "application/json");
  EXPECT_EQ(put2->status, 200) << put2->body;
  auto put3 =
      client_->Put("/api/v1/jobs/dyn", Auth(kAdmin),
                   R"({"version":2,"schedule":"@hourly","command":"x"})", "application/json");
  EXPECT_EQ(put3->status, 412);

  // Config jobs are read-only.
  auto ro = client_->Put("/api/v1/jobs/cfg", good, replaced, "application/json");
  EXPECT_EQ(ro->status, 409);
  EXPECT_THAT(Body(ro)["error"]["message"].get<std::string>(), HasSubstr("jobs.toml:3"));
  EXPECT_EQ(client_->Delete("/api/v1/jobs/cfg", Auth(kAdmin))->status, 409);
  EXPECT_EQ(Create(R"({"id":"cfg","schedule":"@hourly","command":"true"})")->status, 409);

  auto del = client_->Delete("/api/v1/jobs/dyn", Auth(kAdmin));
  EXPECT_EQ(del->status, 204);
  EXPECT_FALSE(scheduler_->GetJob("dyn").has_value());
  EXPECT_EQ(client_->Delete("/api/v1/jobs/dyn", Auth(kAdmin))->status, 404);

  // Every mutation is in the audit log, by token name, never by secret.
  auto audit = client_->Get("/api/v1/audit", Auth(kAdmin));
  json a = Body(audit);
  ASSERT_GE(a["entries"].size(), 5u);
  EXPECT_EQ(a["entries"][0]["action"], "delete");
  EXPECT_EQ(a["entries"][0]["status"], 404);  // failed calls are recorded too
  EXPECT_EQ(a["entries"][0]["result"], "not_found");
  EXPECT_EQ(a["entries"][1]["action"], "delete");
  EXPECT_EQ(a["entries"][1]["who"], "adm");
  EXPECT_EQ(a["entries"][1]["status"], 204);
  EXPECT_EQ(a["entries"][1]["result"], "ok");
  EXPECT_TRUE(a["entries"][1]["before"].is_object());
  EXPECT_TRUE(a["entries"][1]["after"].is_null());
  EXPECT_EQ(audit->body.find(kAdmin), std::string::npos);
}

// The job list is paged by id: limit (default 100, capped at 1000), cursor = next_cursor, q
// filters ids; pages cover every visible job exactly once, in id order.
TEST_F(HttpApiTest, JobListIsPagedById) {
  StartWithTokens();
  // 250 jobs besides "cfg"; ids created out of order.
  for (int i = 249; i >= 0; --i) {
    JobSpec j;
    j.id = (i % 2 == 0 ? "billing.j" : "ops.j") + std::to_string(1000 + i);
    j.schedule = "0 * * * *";
    j.command = "true";
    ASSERT_TRUE(scheduler_->AddJob(j).ok());
  }
  auto ids_of = [](const json& page) {
    std::vector<std::string> ids;
    for (const json& j : page["jobs"]) ids.push_back(j["id"]);
    return ids;
  };
  // Default page: the first 100 ids, and a cursor.
  auto first = client_->Get("/api/v1/jobs", Auth(kRead));
  ASSERT_EQ(first->status, 200) << first->body;
  json f = Body(first);
  ASSERT_EQ(f["jobs"].size(), 100u);
  EXPECT_EQ(f["jobs"][0]["id"], "billing.j1000");
  EXPECT_EQ(f["next_cursor"], f["jobs"][99]["id"]);

  // Walking the pages visits all 251 jobs once, sorted.
  for (int limit : {1, 7, 100, 251, 1000}) {
    std::vector<std::string> seen;
    std::string cursor;
    int pages = 0;
    do {
      std::string path = "/api/v1/jobs?limit=" + std::to_string(limit);
      if (!cursor.empty()) path += "&cursor=" + httplib::detail::encode_query_param(cursor);
      auto r = client_->Get(path, Auth(kRead));
      ASSERT_EQ(r->status, 200) << path << ": " << r->body;
      json page = Body(r);
      ASSERT_LE(page["jobs"].size(), static_cast<size_t>(limit));
      for (const std::string& id : ids_of(page)) seen.push_back(id);
      cursor = page["next_cursor"];
      ASSERT_LT(++pages, 300);
    } while (!cursor.empty());
    EXPECT_EQ(seen.size(), 251u) << "limit " << limit;
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end())) << "limit " << limit;
    EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end()) << "limit " << limit;
    EXPECT_EQ(pages, (251 + limit - 1) / limit) << "limit " << limit;  // no empty last page
  }
  // An empty cursor is the first page, as in /api/v1/runs.
  EXPECT_EQ(Body(client_->Get("/api/v1/jobs?cursor=", Auth(kRead)))["jobs"][0]["id"],
            "billing.j1000");
  // Above the maximum is the maximum.
  EXPECT_EQ(Body(client_->Get("/api/v1/jobs?limit=100000", Auth(kRead)))["jobs"].size(), 251u);

  // A cursor is a position, not an id that must exist: a job deleted meanwhile does not break
  // the walk.
  auto after = Body(client_->Get("/api/v1/jobs?limit=2&cursor=billing.j1001", Auth(kRead)));
  EXPECT_EQ(ids_of(after), (std::vector<std::string>{"billing.j1002", "billing.j1004"}));

  // q: a case-insensitive substring of the id; paged the same way.
  auto q1 = Body(client_->Get("/api/v1/jobs?q=J124&limit=3", Auth(kRead)));
  EXPECT_EQ(ids_of(q1),
            (std::vector<std::string>{"billing.j1240", "billing.j1242", "billing.j1244"}));
  auto q2 = Body(client_->Get(
      "/api/v1/jobs?q=J124&limit=100&cursor=" + q1["next_cursor"].get<std::string>(), Auth(kRead)));
  EXPECT_EQ(q2["jobs"].size(), 7u);
  EXPECT_EQ(q2["next_cursor"], "");
  EXPECT_EQ(Body(client_->Get("/api/v1/jobs?q=nothing-like-it", Auth(kRead)))["jobs"].size(), 0u);

  // A namespaced token pages through its own jobs only.
  std::vector<std::string> billing;
  std::string cursor;
  do {
    json page = Body(client_->Get(
        "/api/v1/jobs?limit=50" + (cursor.empty() ? "" : "&cursor=" + cursor), Auth(kBilling)));
    for (const std::string& id : ids_of(page)) billing.push_back(id);
    cursor = page["next_cursor"];
  } while (!cursor.empty());
  EXPECT_EQ(billing.size(), 125u);
  for (const std::string& id : billing) EXPECT_EQ(id.rfind("billing.", 0), 0u) << id;

  // Bad parameters are 400s naming the parameter.
  for (const auto& [query, name] : std::vector<std::pair<std::string, std::string>>{
           {"limit=0", "limit"},
           {"limit=-1", "limit"},
           {"limit=ten", "limit"},
           {"limit=", "limit"},
           {"cursor=a%2Fb", "cursor"},
           {"cursor=" + std::string(200, 'x'), "cursor"},
           {"q=" + std::string(129, 'x'), "q"},
           {"limit=1&limit=2", "limit"},
           {"page=2", "page"}}) {
    auto bad = client_->Get("/api/v1/jobs?" + query, Auth(kRead));
    ASSERT_EQ(bad->status, 400) << query;
    json e = Body(bad)["error"];
    EXPECT_EQ(e["code"], "invalid_argument") << query;
    EXPECT_THAT(e["message"].get<std::string>(), HasSubstr(name)) << query;
  }
}

// The job list serves a copy of the scheduler's jobs for up to job_list_max_age (default 1 s, on
// the API's clock); a change made through the API shows at once.
TEST_F(HttpApiTest, JobListCopyIsRefreshedByAgeAndByApiChanges) {
  StartWithTokens();
  auto listed = [&] {
    json page = Body(client_->Get("/api/v1/jobs", Auth(kRead)));
    return page["jobs"].size();
  };
  auto gauge = [&] {
    const std::string body = client_->Get("/metrics", Auth(kRead))->body;
    const size_t at = body.find("\ngnomon_jobs ");
    return at == std::string::npos ? std::string()
                                   : body.substr(at + 13, body.find('\n', at + 1) - at - 13);
  };
  EXPECT_EQ(listed(), 1u);
  JobSpec direct;
  direct.id = "direct";
  direct.schedule = "0 * * * *";
  direct.command = "true";
  ASSERT_TRUE(scheduler_->AddJob(direct).ok());
  EXPECT_EQ(listed(), 1u);  // the shared copy, not yet 1 s old
  EXPECT_EQ(gauge(), "1");
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(listed(), 2u);
  EXPECT_EQ(gauge(), "2");
  ASSERT_EQ(Create(kJob)->status, 201);
  EXPECT_EQ(listed(), 3u);  // at once
  EXPECT_EQ(client_->Delete("/api/v1/jobs/dyn", Auth(kAdmin))->status, 204);
  EXPECT_EQ(listed(), 2u);
  // A pause shows at once too.
  auto paused = [&] {
    const json page = Body(client_->Get("/api/v1/jobs", Auth(kRead)));
    for (const json& j : page["jobs"]) {
      if (j["id"] == "cfg") return j["paused"].get<bool>();
    }
    return false;
  };
  EXPECT_FALSE(paused());
  ASSERT_EQ(client_->Post("/api/v1/jobs/cfg/pause", Auth(kOperate), "", "")->status, 200);
  EXPECT_TRUE(paused());
}

// The audit log lives in the backend: what one node recorded, another serves; pages by seq.
TEST_F(HttpApiTest, AuditLogIsKeptInTheBackendAndPaged) {
  StartWithTokens();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(client_->Post("/api/v1/jobs/cfg/trigger", Auth(kOperate), "", "text/plain")->status,
              202);
  }
  Result<std::vector<AuditRecord>> stored = coord_.ListAudit(100, 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 5u);
  EXPECT_EQ((*stored)[0].who, "ops");
  EXPECT_EQ((*stored)[0].action, "trigger");
  EXPECT_EQ((*stored)[0].target, "cfg");

  // A second node's API on the same backend serves them.
  HttpApiOptions o;
  o.clock = &clock_;
  TestApiServer other(*scheduler_, coord_, metrics_, {{"adm", kAdmin, TokenRole::kAdmin, {}}}, o);
  ASSERT_TRUE(other.Start().ok());
  httplib::Client c2("127.0.0.1", other.port());
  json page1 = Body(c2.Get("/api/v1/audit?limit=3", Auth(kAdmin)));
  ASSERT_EQ(page1["entries"].size(), 3u);
  EXPECT_EQ(page1["entries"][0]["seq"], (*stored)[0].seq);
  ASSERT_TRUE(page1.contains("next_before"));
  json page2 = Body(
      c2.Get("/api/v1/audit?limit=3&before=" + std::to_string(page1["next_before"].get<int64_t>()),
             Auth(kAdmin)));
  ASSERT_EQ(page2["entries"].size(), 2u);
  EXPECT_EQ(page2["entries"][1]["seq"], (*stored)[4].seq);
  EXPECT_FALSE(page2.contains("next_before"));
  EXPECT_EQ(c2.Get("/api/v1/audit?before=x", Auth(kAdmin))->status, 400);
  other.server.Stop();
}

// A backend that refuses audit writes while `down` is set.
class FlakyAudit : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Result<int64_t> AppendAudit(const AuditRecord& record, int keep) override {
    if (down) return UnavailableError("backend down");
    return ForwardingCoordinator::AppendAudit(record, keep);
  }
  std::atomic<bool> down{false};
};

// A record the backend could not take is kept and written, in order, before the next one.
TEST_F(HttpApiTest, AuditRecordsSurviveABackendOutage) {
  FlakyAudit flaky(coord_);
  HttpApiOptions o;
  o.clock = &clock_;
  TestApiServer api(*scheduler_, flaky, metrics_, {{"ops", kOperate, TokenRole::kOperate, {}}}, o);
  ASSERT_TRUE(api.catalog.SetStaticJobs({*CompileJob(cfg_)}).ok());
  ASSERT_TRUE(api.Start().ok());
  httplib::Client c("127.0.0.1", api.port());
  flaky.down = true;
  EXPECT_EQ(c.Post("/api/v1/jobs/cfg/pause", Auth(kOperate), "", "text/plain")->status, 200);
  EXPECT_TRUE(coord_.ListAudit(10, 0)->empty());
  flaky.down = false;
  EXPECT_EQ(c.Post("/api/v1/jobs/cfg/resume", Auth(kOperate), "", "text/plain")->status, 200);
  Result<std::vector<AuditRecord>> stored = coord_.ListAudit(10, 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].action, "resume");
  EXPECT_EQ((*stored)[1].action, "pause");
  api.server.Stop();
}

TEST_F(HttpApiTest, HostileBodies) {
  HttpApiOptions o;
  o.max_body_bytes = 1024;
  StartApi({{"adm", kAdmin, TokenRole::kAdmin, {}}}, o);
  auto big = Create(std::string(4096, ' '));
  EXPECT_EQ(big->status, 413);
  // Chunked without a length: counted while streaming.
  auto chunked = client_->Post(
      "/api/v1/jobs", Auth(kAdmin),
      [](size_t offset, httplib::DataSink& sink) {
        if (offset >= 8192) {
          sink.done();
          return true;
        }
        std::string chunk(512, ' ');
        return sink.write(chunk.data(), chunk.size());
      },
      "application/json");
  // The server answers 413 and closes; the client may see the close while still sending.
  if (chunked) {
    EXPECT_EQ(chunked->status, 413);
  }
  EXPECT_EQ(client_->Get("/healthz")->status, 200);

  auto unknown = Create(R"({"id":"x","schedule":"@hourly","command":"true","colour":"red"})");
  EXPECT_EQ(unknown->status, 400);
  EXPECT_THAT(Body(unknown)["error"]["message"].get<std::string>(), HasSubstr("\"colour\""));
  auto wrong = Create(R"({"id":"x","schedule":"@hourly","command":"true","retries":"2"})");
  EXPECT_EQ(wrong->status, 400);
  EXPECT_THAT(Body(wrong)["error"]["message"].get<std::string>(), HasSubstr("retries"));
  auto dup = Create(R"({"id":"x","id":"y","schedule":"@hourly","command":"true"})");
  EXPECT_EQ(dup->status, 400);
  EXPECT_THAT(Body(dup)["error"]["message"].get<std::string>(), HasSubstr("duplicate key"));
  EXPECT_EQ(Create("{nope")->status, 400);
  EXPECT_EQ(Create(R"({"id":"a/b","schedule":"@hourly","command":"true"})")->status, 400);
  auto invalid = Create(R"({"id":"x","schedule":"0 25 * * *","command":"true"})");
  EXPECT_EQ(invalid->status, 400);
  EXPECT_THAT(Body(invalid)["error"]["message"].get<std::string>(), HasSubstr("hour"));
  EXPECT_TRUE(coord_.ListJobs()->empty());  // nothing written
}

// A definition the API refuses names the key at fault in `field` (the dashboard's form puts the
// message next to that input).
TEST_F(HttpApiTest, DefinitionErrorsNameTheirField) {
  StartWithTokens();
  const std::pair<const char*, const char*> cases[] = {
      {R"({"id":"f1","schedule":"* * * * *","command":"true","timeout":"soon"})", "timeout"},
      {R"({"id":"f2","schedule":"nope","command":"true"})", "schedule"},
      {R"({"id":"f3","schedule":"* * * * *","command":"true","shards":0})", "shards"},
      {R"({"id":"f4","schedule":"* * * * *","command":"true","overlap":"sometimes"})", "overlap"},
      {R"({"id":"f5","schedule":"* * * * *","command":"true","params":[1]})", "params"},
  };
  for (const auto& [body, field] : cases) {
    auto r = Create(body);
    ASSERT_EQ(r->status, 400) << body;
    EXPECT_EQ(Body(r)["error"]["field"], field) << r->body;
    EXPECT_THAT(Body(r)["error"]["message"].get<std::string>(), HasSubstr(field)) << r->body;
  }
}

TEST_F(HttpApiTest, DeepJsonRejected) {
  HttpApiOptions o;
  o.max_body_bytes = 1 << 20;
  o.auth = AuthMode::kNone;
  StartApi({}, o);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = client_->Post("/api/v1/jobs", deep, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(Body(r)["error"]["message"].get<std::string>(), HasSubstr("nested deeper"));
}

// A trigger's {"params": {...}} reach the run and its record; bad ones are a 400 naming them,
// and nothing fires.
TEST_F(HttpApiTest, TriggerWithParamsShowsThemOnTheRun) {
  StartWithTokens();
  // The clock stands on an instant of cfg's schedule: that fire runs first (without parameters),
  // and the trigger is a fire of its own.
  const std::string scheduled_id = "cfg@" + std::to_string(clock_.Now().unix_millis());
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, scheduled_id));
  auto t = client_->Post("/api/v1/jobs/cfg/trigger", Auth(kOperate),
                         R"({"params":{"month":"2026-11","dry_run":true}})", "application/json");
  ASSERT_EQ(t->status, 202) << t->body;
  const std::string run_id = Body(t)["run_id"];
  EXPECT_EQ(run_id, "cfg@" + std::to_string(clock_.Now().unix_millis() - 1));
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, run_id));
  auto run = client_->Get("/api/v1/runs/" + run_id, Auth(kRead));
  ASSERT_EQ(run->status, 200) << run->body;
  EXPECT_EQ(Body(run)["attempts"][0]["params"], json({{"month", "2026-11"}, {"dry_run", true}}));
  auto list = client_->Get("/api/v1/runs?job=cfg", Auth(kRead));
  std::map<std::string, json> listed;
  const json list_body = Body(list);
  for (const json& r : list_body["runs"]) listed[r["run_id"]] = r["params"];
  EXPECT_EQ(listed[run_id], json({{"month", "2026-11"}, {"dry_run", true}}));

  for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"params":[1]})", "params: expected an object, got array"},
           {R"({"params":"x"})", "params: expected an object, got string"},
           {R"({"parms":{}})", "body: unknown key \"parms\" (expected params)"},
           {R"([1])", "body: expected a JSON object, got array"},
           {R"({"params":{"a":)", "invalid JSON"},
           {R"({"params":{"k":")" + std::string(kMaxParamsBytes, 'x') + R"("}})",
            "params: 16392 bytes is larger than 16 KiB"}}) {
    auto bad = client_->Post("/api/v1/jobs/cfg/trigger", Auth(kOperate), body, "application/json");
    EXPECT_EQ(bad->status, 400) << body.substr(0, 40);
    EXPECT_THAT(Body(bad)["error"]["message"].get<std::string>(), HasSubstr(want))
        << body.substr(0, 40);
  }
  clock_.Advance(std::chrono::seconds(1));
  // Apart from the scheduled fire, only the trigger's run is listed.
  auto runs = client_->Get("/api/v1/runs?job=cfg", Auth(kRead));
  std::vector<std::string> triggered;
  const json runs_body = Body(runs);
  for (const json& r : runs_body["runs"]) {
    if (r["run_id"] != scheduled_id) triggered.push_back(r["run_id"]);
  }
  EXPECT_EQ(triggered, std::vector<std::string>{run_id}) << "a refused trigger fired nothing";
  // Without a body, or with an empty object, the run has no parameters.
  auto plain = client_->Post("/api/v1/jobs/cfg/trigger", Auth(kOperate), "", "");
  ASSERT_EQ(plain->status, 202) << plain->body;
  const std::string plain_id = Body(plain)["run_id"];
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, plain_id));
  auto plain_run = client_->Get("/api/v1/runs/" + plain_id, Auth(kRead));
  EXPECT_EQ(Body(plain_run)["attempts"][0]["params"], json::object());
}

// POST /runs/{id}/cancel: the backend records who cancelled, the holder stops the run at its
// next state poll; a run that ended is a 409; read tokens and other namespaces are refused.
// A running attempt's output is in GET /api/v1/runs/{id} once the holder published it (every
// live_output_interval), and ?follow=1 streams the run as server-sent events until it ends.
TEST_F(HttpApiTest, LiveOutputIsShownWhileTheRunRunsAndFollowStreamsIt) {
  HttpServerOptions http;
  http.max_streams = 1;
  StartWithTokens(http);
  const std::string scheduled_id = "cfg@" + std::to_string(clock_.Now().unix_millis());
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, scheduled_id));
  std::mutex mu;
  std::condition_variable cv;
  bool second = false;
  exec_.SetBehavior([&](const JobSpec&, const RunContext& ctx) {
    ctx.Output("step 1\n");
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return second; });
    }
    ctx.Output("step 2\n");
    exec_.WaitForStopOrRelease(ctx);
    return ExecResult{};
  });
  auto t = client_->Post("/api/v1/jobs/cfg/trigger", Auth(kOperate), "", "");
  ASSERT_EQ(t->status, 202) << t->body;
  const std::string run_id = Body(t)["run_id"];
  const std::string path = "/api/v1/runs/" + run_id;
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunStarted, run_id));
  // Waits (really, up to 10 s) until the running attempt's output in GET is `want`, advancing
  // the fake clock by a live output interval each time.
  auto await_output = [&](const std::string& want) {
    for (int i = 0; i < 100; ++i) {
      auto r = client_->Get(path, Auth(kRead));
      const json body = Body(r);
      if (body["attempts"][0]["outcome"] == "running" && body["attempts"][0]["output"] == want) {
        return true;
      }
      clock_.Advance(std::chrono::seconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  ASSERT_TRUE(await_output("step 1\n"));

  // The stream: a `run` event at once, another when the output grows, `end` when it ends.
  std::string streamed;
  std::string content_type;
  std::mutex stream_mu;
  std::condition_variable stream_cv;
  std::thread follower([&] {
    auto c = server_->Client();
    c->set_read_timeout(30, 0);
    auto r = c->Get(
        path + "?follow=1", Auth(kRead),
        [&](const httplib::Response& res) {
          std::lock_guard<std::mutex> lock(stream_mu);
          content_type = res.get_header_value("Content-Type");
          return true;
        },
        [&](const char* data, size_t n) {
          {
            std::lock_guard<std::mutex> lock(stream_mu);
            streamed.append(data, n);
          }
          stream_cv.notify_all();
          return true;
        });
    std::lock_guard<std::mutex> lock(stream_mu);
    streamed += "\n<closed>";
    stream_cv.notify_all();
  });
  auto await_stream = [&](const std::string& want) {
    std::unique_lock<std::mutex> lock(stream_mu);
    return stream_cv.wait_for(lock, std::chrono::seconds(10),
                              [&] { return streamed.find(want) != std::string::npos; });
  };
  EXPECT_TRUE(await_stream("event: run\ndata: {\"attempts\":[{"));
  EXPECT_TRUE(await_stream("\"output\":\"step 1\\n\""));
  // A second follower is over max_streams.
  auto busy = server_->Client()->Get(path + "?follow=1", Auth(kRead));
  EXPECT_EQ(busy->status, 503) << busy->body;
  EXPECT_EQ(client_->Get(path + "?follow=2", Auth(kRead))->status, 400);
  EXPECT_EQ(client_->Get(path + "?follow=1", Auth(kBilling))->status, 403);
  {
    std::lock_guard<std::mutex> lock(mu);
    second = true;
  }
  cv.notify_all();
  ASSERT_TRUE(await_output("step 1\nstep 2\n"));
  EXPECT_TRUE(await_stream("\"output\":\"step 1\\nstep 2\\n\""));
  exec_.Release();
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, run_id));
  EXPECT_TRUE(await_stream("\"outcome\":\"succeeded\""));
  EXPECT_TRUE(await_stream("event: end\n"));
  EXPECT_TRUE(await_stream("<closed>"));
  follower.join();
  EXPECT_THAT(content_type, HasSubstr("text/event-stream"));
  // The ended run keeps its output (the handler returned none: the live output is kept).
  EXPECT_EQ(Body(client_->Get(path, Auth(kRead)))["attempts"][0]["output"], "step 1\nstep 2\n");
  // The ended run's stream is one `run` event and `end`.
  auto ended = client_->Get(path + "?follow=1", Auth(kRead));
  ASSERT_EQ(ended->status, 200);
  EXPECT_THAT(ended->body, HasSubstr("event: run\n"));
  EXPECT_THAT(ended->body, HasSubstr("event: end\n"));
}

TEST_F(HttpApiTest, CancelStopsARunningRunAndRecordsWho) {
  StartWithTokens();
  const std::string scheduled_id = "cfg@" + std::to_string(clock_.Now().unix_millis());
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, scheduled_id));
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    const bool stopped = exec_.WaitForStopOrRelease(ctx);
    return ExecResult{stopped ? RunOutcome::kCancelled : RunOutcome::kSucceeded, {}, "", ""};
  });
  auto t = client_->Post("/api/v1/jobs/cfg/trigger", Auth(kOperate), "", "");
  ASSERT_EQ(t->status, 202) << t->body;
  const std::string run_id = Body(t)["run_id"];
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunStarted, run_id));
  const std::string path = "/api/v1/runs/" + run_id + "/cancel";

  EXPECT_EQ(client_->Post(path, Auth(kRead), "", "")->status, 403) << "read may not cancel";
  EXPECT_EQ(client_->Post(path, Auth(kBilling), "", "")->status, 403) << "another namespace";
  auto c = client_->Post(path, Auth(kOperate), "", "");
  ASSERT_EQ(c->status, 200) << c->body;
  EXPECT_EQ(Body(c)["attempts"][0]["outcome"], "cancelled");
  EXPECT_EQ(Body(c)["attempts"][0]["error"], "cancelled by ops");
  // The holder learns it at its next state poll and stops the run.
  clock_.Advance(std::chrono::milliseconds(500));
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, run_id));
  ASSERT_TRUE(exec_.AwaitFinished(1));
  EXPECT_TRUE(exec_.attempts().back().stopped);
  auto run = client_->Get("/api/v1/runs/" + run_id, Auth(kRead));
  ASSERT_EQ(Body(run)["attempts"].size(), 1u) << run->body;
  EXPECT_EQ(Body(run)["attempts"][0]["outcome"], "cancelled");
  EXPECT_EQ(Body(run)["attempts"][0]["error"], "cancelled by ops");

  auto again = client_->Post(path, Auth(kOperate), "", "");
  EXPECT_EQ(again->status, 409) << again->body;
  EXPECT_THAT(Body(again)["error"]["message"].get<std::string>(), HasSubstr("already ended"));
  EXPECT_EQ(client_->Post("/api/v1/runs/cfg@1/cancel", Auth(kOperate), "", "")->status, 404);
  EXPECT_EQ(client_->Post("/api/v1/runs/nonsense/cancel", Auth(kOperate), "", "")->status, 400);
  EXPECT_EQ(client_->Get(path, Auth(kOperate))->status, 405);

  Result<std::vector<AuditRecord>> audit = coord_.ListAudit(100, 0);
  ASSERT_TRUE(audit.ok());
  std::vector<AuditResult> cancels;  // the results of the audited cancels
  for (const AuditRecord& a : *audit) {
    if (a.action != "cancel") continue;
    cancels.push_back(a.result);
    EXPECT_EQ(a.target, "cfg");
    if (a.result == AuditResult::kOk) {
      EXPECT_THAT(a.after, HasSubstr(run_id));
    }
  }
  std::sort(cancels.begin(), cancels.end());
  // The done one (200), the refused second one (409) and the unknown run (404); the 400 names no
  // job of the caller's.
  EXPECT_EQ(cancels, (std::vector<AuditResult>{AuditResult::kOk, AuditResult::kNotFound,
                                               AuditResult::kConflict}));
}

// POST /runs/{id}/rerun: the ended fire runs again as its next attempt (same run id, higher
// token), with the given parameters and who asked in its record; a running fire is a 409.
TEST_F(HttpApiTest, RerunRunsAnEndedFireAgainAsItsNextAttempt) {
  StartWithTokens();
  const std::string run_id = "cfg@" + std::to_string(clock_.Now().unix_millis());
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, run_id));
  const std::string path = "/api/v1/runs/" + run_id + "/rerun";
  EXPECT_EQ(client_->Post(path, Auth(kRead), "", "")->status, 403);
  EXPECT_EQ(client_->Post(path, Auth(kBilling), "", "")->status, 403);
  EXPECT_EQ(client_->Post(path, Auth(kOperate), R"({"params":[1]})", "application/json")->status,
            400);
  auto r =
      client_->Post(path, Auth(kOperate), R"({"params":{"month":"2026-10"}})", "application/json");
  ASSERT_EQ(r->status, 202) << r->body;
  EXPECT_EQ(Body(r)["attempt"], 2);
  EXPECT_EQ(Body(r)["run_id"], run_id);
  ASSERT_TRUE(events_.Await(SchedulerEvent::Kind::kRunFinished, 2));
  auto run = client_->Get("/api/v1/runs/" + run_id, Auth(kRead));
  const json attempts = Body(run)["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << run->body;
  EXPECT_EQ(attempts[1]["attempt"], 2);
  EXPECT_EQ(attempts[1]["outcome"], "succeeded");
  EXPECT_EQ(attempts[1]["cause"], "rerun by ops");
  EXPECT_EQ(attempts[1]["params"], json({{"month", "2026-10"}}));
  // A rerun without parameters keeps the fire's own (its last attempt's).
  ASSERT_EQ(client_->Post(path, Auth(kOperate), "", "")->status, 202);
  ASSERT_TRUE(events_.Await(SchedulerEvent::Kind::kRunFinished, 3));
  const json third = Body(client_->Get("/api/v1/runs/" + run_id, Auth(kRead)))["attempts"];
  ASSERT_EQ(third.size(), 3u);
  EXPECT_EQ(third[2]["params"], json({{"month", "2026-10"}}));
  EXPECT_GT(attempts[1]["fencing_token"].get<int64_t>(),
            attempts[0]["fencing_token"].get<int64_t>());
  ASSERT_EQ(exec_.attempts().size(), 3u);
  EXPECT_EQ(exec_.attempts()[1].attempt, 2);
  EXPECT_EQ(exec_.attempts()[1].run_id, run_id);

  // While a rerun runs, another is refused.
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    exec_.WaitForStopOrRelease(ctx);
    return ExecResult{};
  });
  ASSERT_EQ(client_->Post(path, Auth(kOperate), "", "")->status, 202);
  ASSERT_TRUE(exec_.AwaitStarted(4));
  auto busy = client_->Post(path, Auth(kOperate), "", "");
  EXPECT_EQ(busy->status, 409) << busy->body;
  EXPECT_THAT(Body(busy)["error"]["message"].get<std::string>(), HasSubstr("cancel it first"));
  exec_.Release();
  EXPECT_EQ(client_->Post("/api/v1/runs/cfg@1/rerun", Auth(kOperate), "", "")->status, 404);
}

// POST /jobs/{id}/backfill: the window's fires without a record run, shown as a backfill; sent
// again, it finds them recorded; windows that are too large, reversed or in the future are 400s.
TEST_F(HttpApiTest, BackfillRunsTheMissingFiresOfAWindowOnce) {
  StartWithTokens();
  const std::string path = "/api/v1/jobs/cfg/backfill";
  const std::string window = R"({"from":"2025-12-31T20:00:00Z","to":"2026-01-01T00:00:00Z",)"
                             R"("max_concurrent":2})";
  EXPECT_EQ(client_->Post(path, Auth(kRead), window, "application/json")->status, 403);
  auto b = client_->Post(path, Auth(kOperate), window, "application/json");
  ASSERT_EQ(b->status, 202) << b->body;
  EXPECT_EQ(Body(b)["fires"], 4);
  EXPECT_EQ(Body(b)["recorded"], 0);
  const std::vector<std::string> ids = Body(b)["run_ids"];
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.front(),
            "cfg@" + std::to_string(Instant::ParseRfc3339("2025-12-31T20:00:00Z")->unix_millis()));
  for (const std::string& id : ids) {
    ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, id)) << id;
  }
  for (const std::string& id : ids) {
    const json run = Body(client_->Get("/api/v1/runs/" + id, Auth(kRead)));
    ASSERT_EQ(run["attempts"].size(), 1u) << id;
    EXPECT_EQ(run["attempts"][0]["outcome"], "succeeded") << id;
    EXPECT_EQ(run["attempts"][0]["cause"], "backfill by ops") << id;
  }
  auto again = client_->Post(path, Auth(kOperate), window, "application/json");
  ASSERT_EQ(again->status, 202) << again->body;
  EXPECT_EQ(Body(again)["recorded"], 4);
  EXPECT_TRUE(Body(again)["run_ids"].empty());

  for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"from":"2025-11-01T00:00:00Z","to":"2026-01-01T00:00:00Z"})",
            "the window holds 1464 fires, more than the 1000"},
           {R"({"from":"2026-01-01T00:00:00Z","to":"2025-12-31T00:00:00Z"})",
            "from: must be before to"},
           {R"({"from":"2025-12-31T00:00:00Z","to":"2026-02-01T00:00:00Z"})",
            "to: is in the future"},
           {R"({"to":"2025-12-31T00:00:00Z"})", "from: is required"},
           {R"({"from":"yesterday","to":"2025-12-31T00:00:00Z"})",
            "from: expected an RFC 3339 instant"},
           {R"({"from":"2025-12-30T00:00:00Z","to":"2025-12-31T00:00:00Z","max_concurrent":0})",
            "max_concurrent: expected an integer 1-1024"},
           {R"({"from":"2025-12-30T00:00:00Z","to":"2025-12-31T00:00:00Z","until":1})",
            "unknown key"}}) {
    auto bad = client_->Post(path, Auth(kOperate), body, "application/json");
    EXPECT_EQ(bad->status, 400) << body;
    EXPECT_THAT(Body(bad)["error"]["message"].get<std::string>(), HasSubstr(want)) << body;
  }
}

TEST_F(HttpApiTest, TriggerRunsAndMetrics) {
  StartWithTokens();
  // The clock starts on an instant of cfg's schedule: that fire runs, then three triggers.
  const std::string scheduled_id = "cfg@" + std::to_string(clock_.Now().unix_millis());
  ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, scheduled_id));
  std::vector<std::string> run_ids;
  for (int i = 0; i < 3; ++i) {
    auto t = client_->Post("/api/v1/jobs/cfg/trigger", Auth(kOperate), "", "");
    ASSERT_EQ(t->status, 202) << t->body;
    run_ids.push_back(Body(t)["run_id"]);
    // Announced once reported: the next trigger must not find this run still open (overlap =
    // skip would refuse it).
    ASSERT_TRUE(events_.AwaitRun(SchedulerEvent::Kind::kRunFinished, run_ids.back()));
    clock_.Advance(std::chrono::seconds(1));
  }
  // The first trigger, at the scheduled instant, took the millisecond before it.
  EXPECT_EQ(run_ids[0], "cfg@" + std::to_string(clock_.Now().unix_millis() - 3001));
  auto page1 = client_->Get("/api/v1/runs?job=cfg&limit=2", Auth(kRead));
  ASSERT_EQ(page1->status, 200) << page1->body;
  json p1 = Body(page1);
  ASSERT_EQ(p1["runs"].size(), 2u);
  ASSERT_FALSE(p1["next_cursor"].get<std::string>().empty());
  EXPECT_EQ(p1["runs"][0]["run_id"], run_ids[2]);
  auto page2 =
      client_->Get("/api/v1/runs?job=cfg&limit=2&cursor=" +
                       httplib::detail::encode_query_param(p1["next_cursor"].get<std::string>()),
                   Auth(kRead));
  json p2 = Body(page2);
  ASSERT_EQ(p2["runs"].size(), 2u) << page2->body;
  EXPECT_EQ(p2["runs"][0]["run_id"], scheduled_id);
  EXPECT_EQ(p2["runs"][1]["run_id"], run_ids[0]);
  EXPECT_EQ(p2["next_cursor"], "");

  auto run = client_->Get("/api/v1/runs/" + run_ids[0], Auth(kRead));
  ASSERT_EQ(run->status, 200) << run->body;
  json rj = Body(run);
  ASSERT_EQ(rj["attempts"].size(), 1u);
  EXPECT_TRUE(rj["attempts"][0].contains("output"));
  EXPECT_EQ(client_->Get("/api/v1/runs/cfg@1", Auth(kRead))->status, 404);
  EXPECT_EQ(client_->Get("/api/v1/runs/nonsense", Auth(kRead))->status, 400);

  // Bad parameters name themselves.
  for (const auto& [query, name] :
       std::vector<std::pair<std::string, std::string>>{{"limit=0", "limit"},
                                                        {"limit=abc", "limit"},
                                                        {"outcome=great", "outcome"},
                                                        {"from=yesterday", "from"},
                                                        {"job=a%2Fb", "job"},
                                                        {"colour=red", "colour"}}) {
    auto bad = client_->Get("/api/v1/runs?" + query, Auth(kRead));
    EXPECT_EQ(bad->status, 400) << query;
    EXPECT_THAT(Body(bad)["error"]["message"].get<std::string>(), HasSubstr(name)) << query;
  }
  EXPECT_EQ(client_->Get("/api/v1/runs?limit=100000", Auth(kRead))->status, 200);

  auto metrics = client_->Get("/metrics", Auth(kRead));
  ASSERT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("gnomon_fires_total{job=\"cfg\",outcome=\"succeeded\"} 4"));
  EXPECT_THAT(metrics->body, HasSubstr("gnomon_claims_total{result=\"claimed\"} 4"));
  EXPECT_THAT(metrics->body, HasSubstr("gnomon_jobs 1"));
  EXPECT_THAT(metrics->body, HasSubstr("gnomon_build_info{version=\"9.9.9\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("gnomon_run_duration_seconds_count{job=\"cfg\"} 4"));
}

TEST_F(HttpApiTest, NodesAndCronPreview) {
  StartWithTokens();
  // A peer node (not "n1": the fixture's scheduler heartbeats as n1 and would overwrite it).
  NodeInfo n;
  n.node_id = "peer-7";
  n.host = "h";
  n.version = "9.9.9";
  n.clock_skew = std::chrono::milliseconds(12);
  ASSERT_TRUE(coord_.Heartbeat(n, std::chrono::seconds(30)).ok());
  auto nodes = client_->Get("/api/v1/nodes", Auth(kRead));
  ASSERT_EQ(nodes->status, 200);
  json nj = Body(nodes);
  bool found = false;
  for (const json& e : nj["nodes"]) found |= e["id"] == "peer-7" && e["clock_skew_ms"] == 12;
  EXPECT_TRUE(found) << nodes->body;

  auto p = client_->Get(
      "/api/v1/cron/preview?expr=0%202%20*%20*%20*&tz=Europe/Berlin&n=3&from=2026-01-01T00:00:00Z",
      Auth(kRead));
  ASSERT_EQ(p->status, 200) << p->body;
  json pj = Body(p);
  ASSERT_EQ(pj["next"].size(), 3u);
  EXPECT_EQ(pj["next"][0], "2026-01-01T01:00:00Z");
  EXPECT_FALSE(pj["description"].get<std::string>().empty());
  auto bad = client_->Get("/api/v1/cron/preview?expr=0%2025%20*%20*%20*", Auth(kRead));
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(Body(bad)["error"]["message"].get<std::string>(), HasSubstr("hour"));
  auto zone = client_->Get("/api/v1/cron/preview?expr=@daily&tz=Mars/Olympus", Auth(kRead));
  EXPECT_EQ(zone->status, 400);
  EXPECT_EQ(Body(zone)["error"]["field"], "tz");
  EXPECT_EQ(client_->Get("/api/v1/cron/preview?expr=@daily&n=0", Auth(kRead))->status, 400);
  EXPECT_EQ(client_->Get("/api/v1/cron/preview", Auth(kRead))->status, 400);
  auto never = client_->Get("/api/v1/cron/preview?expr=0%200%2030%202%20*", Auth(kRead));
  EXPECT_EQ(never->status, 200);
  EXPECT_TRUE(Body(never)["next"].empty());
}

TEST_F(HttpApiTest, SyncDynamicJobsIsIdempotent) {
  StartApi({});
  // Another node stored a definition.
  ASSERT_TRUE(
      coord_.PutJob("other", R"({"id":"other","schedule":"@hourly","command":"true"})", 0).ok());
  ASSERT_TRUE(server_->catalog.Sync().ok());
  ASSERT_TRUE(scheduler_->GetJob("other").has_value());
  EXPECT_EQ(scheduler_->GetJob("other")->spec.source, "api");
  ASSERT_TRUE(server_->catalog.Sync().ok());
  EXPECT_EQ(server_->catalog.DynamicJobs().size(), 1u);
  // A definition shadowing a config job is ignored here.
  ASSERT_TRUE(coord_.PutJob("cfg", R"({"id":"cfg","schedule":"@daily","command":"x"})", 0).ok());
  ASSERT_TRUE(server_->catalog.Sync().ok());
  EXPECT_EQ(scheduler_->GetJob("cfg")->spec.schedule, "0 * * * *");
  // Deleted elsewhere: removed here.
  ASSERT_TRUE(coord_.DeleteJob("other", -1).ok());
  ASSERT_TRUE(server_->catalog.Sync().ok());
  EXPECT_FALSE(scheduler_->GetJob("other").has_value());
  EXPECT_TRUE(server_->catalog.DynamicJobs().empty());
}

TEST_F(HttpApiTest, AuthNoneAllowsEverythingAndTellsTheDashboard) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  // With auth = "none" everything is allowed; the dashboard is told not to ask for a token.
  StartWithoutAuth();
  EXPECT_EQ(Create(kJob, "")->status, 201);
  EXPECT_EQ(client_->Get("/")->get_header_value("X-Gnomon-Auth"), "none");
}

// An API with tokens but none configured refuses every authenticated call.
TEST_F(HttpApiTest, NoTokensMeansNoAccess) {
  StartApi({});
  EXPECT_EQ(Create(kJob, "")->status, 401);
  EXPECT_EQ(client_->Get("/api/v1/jobs")->status, 401);
  EXPECT_EQ(client_->Get("/healthz")->status, 200);
  EXPECT_EQ(client_->Get("/")->get_header_value("X-Gnomon-Auth"), "bearer");
}

TEST_F(HttpApiTest, TokenValidation) {
  EXPECT_FALSE(ValidateTokens({{"a", "short", TokenRole::kRead, {}}}).ok());
  EXPECT_FALSE(
      ValidateTokens({{"a", kAdmin, TokenRole::kRead, {}}, {"a", kRead, TokenRole::kRead, {}}})
          .ok());
  Status same =
      ValidateTokens({{"a", kAdmin, TokenRole::kRead, {}}, {"b", kAdmin, TokenRole::kRead, {}}});
  EXPECT_FALSE(same.ok());
  EXPECT_EQ(same.message().find(kAdmin), std::string::npos);  // never echo a secret
  EXPECT_TRUE(ParseTokenRole("operate").ok());
  EXPECT_FALSE(ParseTokenRole("root").ok());
}

TEST_F(HttpApiTest, ServesTheEmbeddedDashboardWithoutAToken) {
  StartWithTokens();
  auto index = client_->Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(index->body, HasSubstr("<!doctype html>"));
  EXPECT_THAT(index->body, HasSubstr("/assets/app.js"));
  EXPECT_EQ(index->get_header_value("Cache-Control"), "no-cache");
  EXPECT_THAT(index->get_header_value("Content-Security-Policy"), HasSubstr("default-src 'self'"));
  EXPECT_EQ(index->get_header_value("X-Gnomon-Auth"), "bearer");
  EXPECT_EQ(client_->Get("/index.html")->body, index->body);

  auto js = client_->Get("/assets/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_FALSE(js->body.empty());
  EXPECT_EQ(client_->Get("/assets/style.css")->get_header_value("Content-Type"),
            "text/css; charset=utf-8");

  // Revalidation: the ETag answers 304 without a body.
  const std::string etag = js->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = client_->Get("/assets/app.js", {{"If-None-Match", etag}});
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  EXPECT_EQ(client_->Get("/assets/app.js", {{"If-None-Match", "\"other\""}})->status, 200);

  // Unknown static paths are JSON 404s; only GET/HEAD; the API keeps its auth.
  auto missing = client_->Get("/assets/nope.js");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Body(missing)["error"]["code"], "not_found");
  EXPECT_EQ(client_->Get("/assets/")->status, 404);
  EXPECT_EQ(client_->Get("/assets/../index.html")->status, 404);
  EXPECT_EQ(client_->Post("/index.html", "", "text/plain")->status, 405);
  EXPECT_EQ(client_->Head("/")->status, 200);
  EXPECT_EQ(client_->Get("/api/v1/jobs")->status, 401);
  EXPECT_EQ(client_->Get("/api/v1/jobs", Auth(kRead))->status, 200);
}

TEST_F(HttpApiTest, EmbeddedAssetsHaveTypesAndValidators) {
  ASSERT_FALSE(WebAssets().empty());
  ASSERT_NE(FindWebAsset("/"), nullptr);
  EXPECT_EQ(FindWebAsset("/"), FindWebAsset("/index.html"));
  EXPECT_EQ(FindWebAsset("/nope"), nullptr);
  for (const WebAsset& a : WebAssets()) {
    EXPECT_EQ(a.path.substr(0, 1), "/") << a.path;
    EXPECT_NE(a.content_type, "application/octet-stream") << a.path;
    EXPECT_EQ(a.etag.size(), 18u) << a.path;  // 16 hex digits in quotes
    EXPECT_FALSE(a.body.empty()) << a.path;
  }
}

}  // namespace
}  // namespace gnomon::server

namespace gnomon::server {
namespace {

using json = nlohmann::json;

// The run rendering before AppendRunJson: the reference the hand-written JSON must equal byte
// for byte.
json ReferenceRunJson(const RunRecord& r, bool with_output) {
  json j(json::value_t::object);
  j["run_id"] = r.run_id;
  j["job_id"] = r.job_id;
  j["scheduled_at"] = r.scheduled_at.ToRfc3339();
  j["shard"] = r.shard;
  j["shard_count"] = r.shard_count;
  j["attempt"] = r.attempt;
  j["fencing_token"] = r.fencing_token;
  j["node_id"] = r.node_id;
  j["started_at"] = r.started_at.ToRfc3339();
  j["finished_at"] =
      r.outcome == RunOutcome::kRunning ? json(nullptr) : json(r.finished_at.ToRfc3339());
  j["outcome"] = ToString(r.outcome);
  j["exit_code"] = r.exit_code ? json(*r.exit_code) : json(nullptr);
  j["error"] = r.error;
  j["skip_reason"] = r.skip_reason;
  j["cause"] = r.cause;
  // Parameters that are a JSON object are shown as that object; anything else (what no writer
  // stores: a corrupt backend) as none.
  const json params = json::parse(r.params, nullptr, false);
  j["params"] = params.is_object() ? params : json::object();
  if (with_output) j["output"] = r.output;
  return j;
}

std::string Rfc3339Json(Instant t) {
  std::string out;
  AppendRfc3339Json(out, t);
  return out;
}

std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

TEST(RunJsonTest, Rfc3339MatchesInstantToRfc3339) {
  auto expect_same = [](int64_t ms) {
    const Instant t = Instant::FromUnixMillis(ms);
    ASSERT_EQ(Rfc3339Json(t), "\"" + t.ToRfc3339() + "\"") << ms;
  };
  constexpr int64_t kDay = 86400000;
  constexpr int64_t kYear0 = -62167219200000;     // 0000-01-01T00:00:00.000Z
  constexpr int64_t kYear9999 = 253402300799999;  // 9999-12-31T23:59:59.999Z
  // Around the epoch, each side of the four-digit-year range (and past it, the fallback),
  // century and leap days: 1900 (not leap), 2000 (leap), 2100 (not leap), 1600 (leap).
  for (int64_t edge :
       {int64_t{0}, kYear0, kYear9999, int64_t{951782400000} /* 2000-02-29 */,
        int64_t{-2203891200000} /* 1900-03-01 */, int64_t{4107542400000} /* 2100-03-01 */,
        int64_t{-11670912000000} /* 1600-02-29 */, int64_t{1795989000000} /* 2026-11-29 */}) {
    for (int64_t d = -2000; d <= 2000; ++d) expect_same(edge + d);
    for (int64_t d = -3; d <= 3; ++d) expect_same(edge + d * kDay);
  }
  expect_same(kYear0 - 1);  // year -1
  expect_same(kYear9999 + 1);
  expect_same(kYear0 - 400 * 365 * kDay);
  expect_same(kYear9999 + 400 * 365 * kDay);
  // Every day from 1600 to 2500, at a varying time of day; then random instants over the range.
  uint64_t x = 0x9e3779b97f4a7c15;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int64_t day = -11676096000000; day < 16725225600000; day += kDay) {
    expect_same(day + static_cast<int64_t>(next() % kDay));
  }
  for (int i = 0; i < 200000; ++i) {
    expect_same(kYear0 + static_cast<int64_t>(next() % static_cast<uint64_t>(kYear9999 - kYear0)));
  }
}

TEST(RunJsonTest, StringsMatchNlohmannDump) {
  auto expect_same = [](const std::string& s) {
    ASSERT_EQ(JsonString(s), json(s).dump(-1, ' ', false, json::error_handler_t::replace))
        << json(s).dump(-1, ' ', true, json::error_handler_t::replace);
  };
  for (int c = 0; c < 256; ++c) {
    expect_same(std::string(1, static_cast<char>(c)));
    expect_same("a" + std::string(1, static_cast<char>(c)) + "b");
  }
  expect_same("");
  expect_same("plain text, no escapes: /path/to/x.sh --flag=1");
  expect_same("quote \" backslash \\ tab \t newline \n cr \r nul " + std::string(1, '\0') + " end");
  expect_same("\x7f del");
  expect_same("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // valid UTF-8
  expect_same("bad \xff\xfe, cut \xe2\x82, overlong \xc0\xaf, surrogate \xed\xa0\x80");
  expect_same("\"\\\"\\");
  uint64_t x = 42;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005 + 1442695040888963407;
    std::string s(static_cast<size_t>(x >> 59), ' ');
    for (char& c : s) {
      x = x * 6364136223846793005 + 1442695040888963407;
      // Mostly ASCII with some control characters; one string in 8 gets high bytes.
      const unsigned r = static_cast<unsigned>(x >> 33);
      c = static_cast<char>(i % 8 == 0 ? r & 0xff : r % 0x80);
    }
    expect_same(s);
  }
}

TEST(RunJsonTest, RunMatchesTheJsonTreeRendering) {
  RunRecord base;
  base.run_id = "billing.report@1795989000000";
  base.job_id = "billing.report";
  base.scheduled_at = Instant::FromUnixMillis(1795989000000);
  base.shard = 2;
  base.shard_count = 4;
  base.attempt = 3;
  base.fencing_token = int64_t{1} << 40;
  base.node_id = "node-a";
  base.started_at = Instant::FromUnixMillis(1795989000012);
  base.finished_at = Instant::FromUnixMillis(1795989061999);
  base.outcome = RunOutcome::kFailed;
  base.exit_code = -9;
  base.error = "exit status 1: \"quoted\"\n\tand tabbed \\ back";
  base.output = "line 1\nline 2 caf\xc3\xa9 \xff";
  std::vector<RunRecord> records{base};
  RunRecord running = base;
  running.outcome = RunOutcome::kRunning;
  running.exit_code.reset();
  running.error.clear();
  running.output.clear();
  records.push_back(running);
  RunRecord skipped = base;
  skipped.outcome = RunOutcome::kSkipped;
  skipped.fencing_token = 0;
  skipped.exit_code.reset();
  skipped.skip_reason = "overlap";
  skipped.started_at = Instant::FromUnixMillis(-1);
  records.push_back(skipped);
  for (RunOutcome o :
       {RunOutcome::kSucceeded, RunOutcome::kTimedOut, RunOutcome::kLost, RunOutcome::kCancelled}) {
    RunRecord r = base;
    r.outcome = o;
    r.exit_code = 0;
    records.push_back(r);
  }
  for (const char* params : {R"({"month":"2026-11","n":[1,2.5],"o":{"x":null}})", "[1]", "{",
                             "{\"a\":1} trailing", "\"text\""}) {
    RunRecord r = base;
    r.params = params;
    records.push_back(r);
  }
  RunRecord rerun = base;
  rerun.cause = "rerun by \"ops\"\n";
  records.push_back(rerun);
  for (const RunRecord& r : records) {
    for (bool with_output : {false, true}) {
      std::string out;
      AppendRunJson(out, r, with_output);
      EXPECT_EQ(out, DumpJson(ReferenceRunJson(r, with_output))) << ToString(r.outcome);
    }
  }
}

}  // namespace
}  // namespace gnomon::server
