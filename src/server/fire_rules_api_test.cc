// Windows, calendars and jitter through the HTTP API (docs/semantics.md "Windows, calendars and
// jitter"): the calendars list, the cron preview's excluded fires, and definitions that use them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "src/server/api_test_fixture.h"

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kAdmin[] = "admin-secret-0123456789";
constexpr char kRead[] = "read-secret-0123456789";

// The job's FireRulesSpec to set keys of (created when unset).
inline FireRulesSpec& Rules(JobSpec& j) {
  return j.fire_rules ? *j.fire_rules : j.fire_rules.emplace();
}

class FireRulesApiTest : public ApiTestFixture {
 protected:
  void SetUp() override {
    auto calendars = std::make_shared<Calendars>();
    ASSERT_TRUE(calendars->Add({"cn-holidays", {"2026-10-01/2026-10-07"}, "gnomon.toml:7"}).ok());
    JobCatalogOptions catalog;
    catalog.calendars = calendars;
    StartApi({{"adm", kAdmin, TokenRole::kAdmin, {}}, {"ro", kRead, TokenRole::kRead, {}}},
             catalog);
  }
  httplib::Result Create(const json& body) {
    return client_->Post("/api/v1/jobs", Auth(kAdmin), body.dump(), "application/json");
  }
};

TEST_F(FireRulesApiTest, CalendarsAreListedAndThePreviewShowsTheFiresTheyExclude) {
  auto list = client_->Get("/api/v1/calendars", Auth(kRead));
  ASSERT_EQ(list->status, 200) << list->body;
  EXPECT_EQ(Body(list),
            json::parse(R"({"calendars":[{"id":"cn-holidays","entries":["2026-10-01/2026-10-07"],
                             "source":"gnomon.toml:7"}]})"));
  EXPECT_EQ(client_->Get("/api/v1/calendars")->status, 401);

  auto p = client_->Get(
      "/api/v1/cron/preview?expr=0%200%202%20*%20*%20*&tz=Asia/Shanghai&n=3"
      "&from=2026-09-29T00:00:00Z&calendars=cn-holidays&exclude=2026-10-09",
      Auth(kRead));
  ASSERT_EQ(p->status, 200) << p->body;
  const json pj = Body(p);
  EXPECT_EQ(pj["next"], json::parse(R"(["2026-09-29T18:00:00Z","2026-10-07T18:00:00Z",
                                        "2026-10-09T18:00:00Z"])"));
  ASSERT_EQ(pj["excluded"].size(), 8u) << pj.dump();
  EXPECT_EQ(pj["excluded"][0], "2026-09-30T18:00:00Z") << "October 1st, 02:00 in Shanghai";
  EXPECT_EQ(pj["excluded"][7], "2026-10-08T18:00:00Z") << "the 9th, excluded by date";

  auto unknown = client_->Get("/api/v1/cron/preview?expr=@daily&calendars=nope", Auth(kRead));
  EXPECT_EQ(unknown->status, 400);
  EXPECT_EQ(Body(unknown)["error"]["field"], "calendars");
  EXPECT_THAT(Body(unknown)["error"]["message"].get<std::string>(),
              HasSubstr("\"nope\" is not defined"));
  auto bad = client_->Get("/api/v1/cron/preview?expr=@daily&exclude=2026-02-30", Auth(kRead));
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Body(bad)["error"]["field"], "exclude");
}

TEST_F(FireRulesApiTest, DefinitionsWithWindowsCalendarsAndJitter) {
  auto created = Create({{"id", "win"},
                         {"schedule", "0 0 * * * *"},
                         {"command", "true"},
                         {"start_at", "2030-01-01T00:00:00Z"},
                         {"jitter", "5m"},
                         {"calendars", {"cn-holidays"}}});
  ASSERT_EQ(created->status, 201) << created->body;
  auto win = client_->Get("/api/v1/jobs/win", Auth(kRead));
  ASSERT_EQ(win->status, 200) << win->body;
  const json w = Body(win);
  EXPECT_EQ(w["window"], "not_started");
  EXPECT_EQ(w["next_fire"], "2030-01-01T00:00:00.000Z");
  JobSpec spec;
  spec.id = "win";
  Rules(spec).jitter = std::chrono::minutes(5);
  const Instant first = *Instant::ParseRfc3339("2030-01-01T00:00:00Z");
  EXPECT_EQ(w["next_start"], DueAt(spec, first).ToRfc3339());
  EXPECT_EQ(w["spec"]["calendars"], json::array({"cn-holidays"}));
  EXPECT_EQ(w["spec"]["start_at"], "2030-01-01T00:00:00.000Z");

  // A record of one of its scheduled fires shows how long after its instant it was due.
  const FireKey fire{"win", first, 0, 1};
  ASSERT_TRUE(coord_.RecordSkipped(fire, "n1", "misfire").ok());
  auto run = client_->Get("/api/v1/runs/" + fire.RunId(), Auth(kRead));
  ASSERT_EQ(run->status, 200) << run->body;
  EXPECT_EQ(Body(run)["jitter_offset_ms"], JitterOffset(spec, first).count());

  auto ended = Create({{"id", "over"},
                       {"schedule", "@daily"},
                       {"command", "true"},
                       {"end_at", "2026-08-01T00:00:00Z"}});
  ASSERT_EQ(ended->status, 201) << ended->body;
  const json o = Body(client_->Get("/api/v1/jobs/over", Auth(kRead)));
  EXPECT_EQ(o["window"], "ended");
  EXPECT_TRUE(o["next_fire"].is_null());
  // A job without jitter: none shown.
  const FireKey unjittered{"over", first, 0, 1};
  ASSERT_TRUE(coord_.RecordSkipped(unjittered, "n1", "misfire").ok());
  EXPECT_FALSE(Body(client_->Get("/api/v1/runs/" + unjittered.RunId(), Auth(kRead)))
                   .contains("jitter_offset_ms"));

  struct Bad {
    json body;
    const char* field;
    const char* message;
  };
  for (const Bad& b : {
           Bad{{{"calendars", {"nope"}}}, "calendars", "calendars[0]: \"nope\" is not defined"},
           Bad{{{"max_runs", 3}}, "max_runs", "max_runs: needs start_at"},
           Bad{{{"jitter", "2h"}}, "jitter", "jitter: 2h is out of range 0s to 1h"},
           Bad{{{"exclude", {"2026-12-25", "soon"}}}, "exclude", "exclude[1]: \"soon\""},
           Bad{{{"start_at", "tomorrow"}}, "start_at", "start_at: "},
           Bad{{{"start_at", "2030-01-02T00:00:00Z"}, {"end_at", "2030-01-01T00:00:00Z"}},
               "end_at",
               "end_at: is before start_at"},
       }) {
    json body = {{"id", "bad"}, {"schedule", "@daily"}, {"command", "true"}};
    body.update(b.body);
    auto r = Create(body);
    EXPECT_EQ(r->status, 400) << body.dump();
    EXPECT_THAT(Body(r)["error"]["message"].get<std::string>(), HasSubstr(b.message))
        << body.dump();
    EXPECT_EQ(Body(r)["error"]["field"], b.field) << r->body;
  }
}

}  // namespace
}  // namespace gnomon::server
