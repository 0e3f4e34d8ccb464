// Jobs that fire jobs through the HTTP API (docs/semantics.md "Dependencies"): the set's checks
// on create and replace (missing jobs, cycles, namespaces), delete while named, and `parents`.
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
constexpr char kTeamA[] = "team-a-secret-0123456789";

class DependenciesApiTest : public ApiTestFixture {
 protected:
  void SetUp() override {
    StartApi(
        {{"adm", kAdmin, TokenRole::kAdmin, {}}, {"team-a", kTeamA, TokenRole::kAdmin, {"a-"}}});
  }
  httplib::Result Create(const json& body, std::string_view token = kAdmin) {
    return client_->Post("/api/v1/jobs", Auth(token), body.dump(), "application/json");
  }
  httplib::Result Replace(const std::string& id, json body) {
    auto now = client_->Get("/api/v1/jobs/" + id, Auth(kAdmin));
    httplib::Headers h = Auth(kAdmin);
    h.emplace("If-Match", now->get_header_value("ETag"));
    return client_->Put("/api/v1/jobs/" + id, h, body.dump(), "application/json");
  }
  // A daily job that fires `load` when it succeeds.
  const json kExtract = {
      {"id", "extract"}, {"schedule", "@daily"}, {"command", "true"}, {"on_success", {"load"}}};
  static std::string Message(const httplib::Result& r) {
    return Body(r)["error"]["message"].get<std::string>();
  }
};

TEST_F(DependenciesApiTest, AChildMustExistAndNoCycleMayClose) {
  auto missing = Create(kExtract);
  ASSERT_EQ(missing->status, 400) << missing->body;
  EXPECT_EQ(Message(missing), "job \"extract\": on_success: \"load\" is not defined");
  EXPECT_EQ(Body(missing)["error"]["field"], "on_success");
  EXPECT_TRUE(coord_.ListJobs()->empty()) << "nothing stored";

  // A job with no schedule: it runs as a child only.
  auto load = Create({{"id", "load"}, {"command", "true"}});
  ASSERT_EQ(load->status, 201) << load->body;
  EXPECT_TRUE(Body(load)["next_fire"].is_null());
  ASSERT_EQ(Create(kExtract)->status, 201);
  auto check = Create({{"id", "check"}, {"command", "true"}, {"on_failure", {"extract"}}});
  ASSERT_EQ(check->status, 201) << check->body;
  EXPECT_EQ(Body(check)["spec"]["on_failure"], json({"extract"}));

  // load -> check closes the cycle load -> check -> extract -> load.
  auto cycle = Replace("load", {{"command", "true"}, {"on_complete", {"check"}}});
  ASSERT_EQ(cycle->status, 400) << cycle->body;
  EXPECT_EQ(Message(cycle), "job \"load\": on_complete: a cycle: load -> check -> extract -> load");
  EXPECT_EQ(json::parse(coord_.GetJob("load")->definition)["on_complete"], json::array())
      << "the stored definition is unchanged";
  auto self = Replace("load", {{"command", "true"}, {"on_complete", {"load"}}});
  EXPECT_EQ(self->status, 400);
  EXPECT_THAT(Message(self), HasSubstr("on_complete: names the job itself"));

  auto parents = client_->Get("/api/v1/jobs/load", Auth(kAdmin));
  EXPECT_EQ(Body(parents)["parents"], json({"extract"}));
  EXPECT_EQ(Body(client_->Get("/api/v1/jobs/extract", Auth(kAdmin)))["parents"], json({"check"}));
}

TEST_F(DependenciesApiTest, ATokenNamesChildrenInItsNamespacesOnly) {
  ASSERT_EQ(Create({{"id", "b-payroll"}, {"command", "true"}})->status, 201);
  ASSERT_EQ(Create({{"id", "a-report"}, {"command", "true"}})->status, 201);
  auto outside = Create({{"id", "a-etl"},
                         {"schedule", "@daily"},
                         {"command", "true"},
                         {"on_complete", {"a-report", "b-payroll"}}},
                        kTeamA);
  ASSERT_EQ(outside->status, 400) << outside->body;
  EXPECT_EQ(Message(outside),
            "job \"a-etl\": on_complete: \"b-payroll\" is outside the namespaces of token "
            "\"team-a\"");
  EXPECT_EQ(Create({{"id", "a-etl"},
                    {"schedule", "@daily"},
                    {"command", "true"},
                    {"on_complete", {"a-report"}}},
                   kTeamA)
                ->status,
            201);
}

TEST_F(DependenciesApiTest, DeletingAJobOthersFireNeedsForce) {
  ASSERT_EQ(Create({{"id", "load"}, {"command", "true"}})->status, 201);
  ASSERT_EQ(Create(kExtract)->status, 201);
  auto refused = client_->Delete("/api/v1/jobs/load", Auth(kAdmin));
  ASSERT_EQ(refused->status, 409) << refused->body;
  EXPECT_EQ(Body(refused)["error"]["code"], "has_dependents");
  EXPECT_THAT(Message(refused), HasSubstr("is named by \"extract\""));
  EXPECT_EQ(client_->Delete("/api/v1/jobs/load?force=maybe", Auth(kAdmin))->status, 400);
  EXPECT_EQ(client_->Delete("/api/v1/jobs/load?force=false", Auth(kAdmin))->status, 409);
  EXPECT_TRUE(coord_.GetJob("load").ok());
  EXPECT_EQ(client_->Delete("/api/v1/jobs/load?force=true", Auth(kAdmin))->status, 204);
  EXPECT_FALSE(scheduler_->GetJob("load").has_value());
  // The parent itself goes without force: nothing names it.
  EXPECT_EQ(client_->Delete("/api/v1/jobs/extract", Auth(kAdmin))->status, 204);
}

}  // namespace
}  // namespace gnomon::server
