#include "src/server/job_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;

TEST(JobJsonTest, RoundTripsEveryKey) {
  Result<nlohmann::json> j = ParseJsonBody(R"({
    "id": "report", "schedule": "0 0 2 1 * *", "timezone": "Asia/Shanghai",
    "argv": ["/opt/settle", "--month=prev"], "timeout": "30m", "retries": 2,
    "retry_backoff": "10s", "overlap": "allow", "misfire": "all", "catchup_window": "2h",
    "on_lost": "rerun", "shards": 3, "max_consecutive_failures": 4, "enabled": false,
    "description": "d", "env": {"A": "1"}, "kill_grace": "5s", "history_keep": 7,
    "history_max_age": "1d", "params": {"month": "prev", "n": [1, 2.5]}})");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  Result<JobSpec> spec = JobSpecFromJson(*j);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->argv.size(), 2u);
  EXPECT_EQ(spec->timeout, std::chrono::minutes(30));
  EXPECT_EQ(spec->overlap, OverlapPolicy::kAllow);
  EXPECT_EQ(spec->on_lost, LostPolicy::kRerun);
  EXPECT_FALSE(spec->enabled);
  EXPECT_EQ(spec->env.at("A"), "1");
  EXPECT_EQ(spec->params, R"({"month":"prev","n":[1,2.5]})");
  Result<JobSpec> again = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(JobSpecToJson(*again), JobSpecToJson(*spec));
  EXPECT_TRUE(ValidateJobSpec(*again).ok());
}

TEST(JobJsonTest, HttpTarget) {
  Result<nlohmann::json> j = ParseJsonBody(
      R"({"id":"h","schedule":"@hourly","http":{"url":"http://x/y","method":"GET","headers":{"X":"1"}}})");
  ASSERT_TRUE(j.ok());
  Result<JobSpec> spec = JobSpecFromJson(*j);
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(spec->http.has_value());
  EXPECT_EQ(spec->http->method, "GET");
  Result<nlohmann::json> bad = ParseJsonBody(R"({"http":{"uri":"http://x"}})");
  ASSERT_TRUE(bad.ok());
  EXPECT_THAT(JobSpecFromJson(*bad).status().message(), HasSubstr("http: unknown key \"uri\""));
}

TEST(JobJsonTest, UnknownKeyNamedWithHint) {
  Result<JobSpec> spec = JobSpecFromJson(nlohmann::json{{"schedulle", "x"}});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("unknown key \"schedulle\""));
  EXPECT_THAT(spec.status().message(), HasSubstr("did you mean \"schedule\""));
}

TEST(JobJsonTest, WrongTypesNameTheField) {
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"retries", "2"}}).status().message(),
              HasSubstr("retries: expected an integer, got string"));
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"retries", 1.5}}).status().message(),
              HasSubstr("retries: expected an integer"));
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"timeout", 30}}).status().message(),
              HasSubstr("timeout: expected a duration"));
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"timeout", "-1s"}}).status().message(),
              HasSubstr("timeout:"));
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"argv", {"a", 1}}}).status().message(),
              HasSubstr("argv[1]: expected a string"));
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"env", {{"A", 1}}}}).status().message(),
              HasSubstr("env.A: expected a string"));
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"overlap", "sometimes"}}).status().message(),
              HasSubstr("overlap:"));
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"shards", 1e12}}).status().message(),
              HasSubstr("shards"));
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"shards", 99999999999LL}}).status().message(),
              HasSubstr("shards: 99999999999 is out of range"));
  EXPECT_FALSE(JobSpecFromJson(nlohmann::json::array()).ok());
}

TEST(JobJsonTest, ParamsAreAnObjectOfAtMost16KiB) {
  EXPECT_THAT(JobSpecFromJson(nlohmann::json{{"params", "x=1"}}).status().message(),
              HasSubstr("params: expected an object, got string"));
  EXPECT_THAT(
      JobSpecFromJson(nlohmann::json{{"params", {{"k", std::string(kMaxParamsBytes, 'x')}}}})
          .status()
          .message(),
      HasSubstr("params: 16392 bytes is larger than 16 KiB"));
  // An empty object is no parameters; none show as an empty object.
  Result<JobSpec> empty = JobSpecFromJson(nlohmann::json{{"params", nlohmann::json::object()}});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->params, "");
  EXPECT_EQ(JobSpecToJson(*empty).at("params"), nlohmann::json::object());
}

TEST(JobJsonTest, ParamsFromCommandLineArguments) {
  EXPECT_EQ(*ParamsFromArgs({}), "");
  EXPECT_EQ(*ParamsFromArgs({"month=2026-11", "n:=3", "dry:=true", "eq=a=b", "o:={\"x\":[1]}"}),
            R"({"dry":true,"eq":"a=b","month":"2026-11","n":3,"o":{"x":[1]}})");
  EXPECT_THAT(ParamsFromArgs({"novalue"}).status().message(),
              HasSubstr("--param \"novalue\": expected key=value or key:=json"));
  EXPECT_THAT(ParamsFromArgs({"=x"}).status().message(), HasSubstr("expected key=value"));
  EXPECT_THAT(ParamsFromArgs({"n:=tru"}).status().message(), HasSubstr("--param n:"));
}

TEST(JobJsonTest, DuplicateKeysRejected) {
  Result<nlohmann::json> j = ParseJsonBody(R"({"id":"a","retries":1,"retries":2})");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(j.status().message(), HasSubstr("duplicate key \"retries\""));
  // The same key in different objects is fine.
  EXPECT_TRUE(ParseJsonBody(R"({"a":{"x":1},"b":{"x":1}})").ok());
  EXPECT_FALSE(ParseJsonBody(R"({"a":{"x":1,"x":2}})").ok());
}

TEST(JobJsonTest, DeepNestingRejectedWithoutRecursion) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  Result<nlohmann::json> j = ParseJsonBody(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(j.status().message(), HasSubstr("nested deeper than 64"));
  // Brackets inside strings do not count.
  EXPECT_TRUE(ParseJsonBody("{\"a\":\"" + std::string(1000, '[') + "\"}").ok());
  EXPECT_TRUE(ParseJsonBody(std::string(64, '[') + std::string(64, ']')).ok());
  EXPECT_FALSE(ParseJsonBody(std::string(65, '[') + std::string(65, ']')).ok());
}

TEST(JobJsonTest, InvalidJsonAndUtf8) {
  EXPECT_THAT(ParseJsonBody("{").status().message(), HasSubstr("invalid JSON"));
  EXPECT_FALSE(ParseJsonBody("{\"id\":\"\xff\xfe\"}").ok());
  EXPECT_FALSE(ParseJsonBody("").ok());
}

TEST(JobJsonTest, DumpReplacesInvalidUtf8) {
  EXPECT_NO_THROW({ (void)DumpJson(nlohmann::json{{"output", std::string("a\xff")}}); });
}

}  // namespace
}  // namespace gnomon::server
